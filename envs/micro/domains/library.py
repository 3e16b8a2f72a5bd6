"""Library: members, books, loans. A member may hold one loan at a time."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, first_data, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, rows, table, task


class LibrarySystem:
    """A lending library with members, a catalogue and loans."""

    def __init__(self, init_config: dict):
        self.members: dict = {}
        self.books: dict = {}
        self.loans: dict = {}
        self.holds: list = []
        self.next_loan_no: int = 1
        self.max_loans: int = 1
        self.init_config = init_config

    def find_member(self, member: str) -> dict:
        """Find a library member by full name.

        Args:
            member: The member's full name.
        """
        found = [dict(m) for m in self.members.values() if m["name"] == member]
        if not found:
            return {"success": False, "error": f"no member named {member}"}
        return {"success": True, "data": found}

    def list_loans(self, member_id: str) -> dict:
        """The active loans of a member.

        Args:
            member_id: The member's id.
        """
        if member_id not in self.members:
            return {"success": False, "error": f"unknown member {member_id}"}
        rows = [
            {"loan_id": ln["loan_id"], "book_id": ln["book_id"], "title": self.books[ln["book_id"]]["title"]}
            for ln in self.loans.values()
            if ln["member_id"] == member_id and ln["status"] == "active"
        ]
        return {"success": True, "data": rows}

    def return_book(self, loan_id: str) -> dict:
        """Return a borrowed book.

        Args:
            loan_id: The loan's id.
        """
        loan = self.loans.get(loan_id)
        if loan is None or loan["status"] != "active":
            return {"success": False, "error": f"no active loan {loan_id}"}
        loan["status"] = "returned"
        self.books[loan["book_id"]]["copies_available"] += 1
        return {"success": True, "data": {"loan_id": loan_id, "status": "returned"}}

    def search_catalog(self, title: str) -> dict:
        """Find books whose title contains the text.

        Args:
            title: Part of a title.
        """
        hits = [dict(b) for b in self.books.values() if title.lower() in b["title"].lower()]
        if not hits:
            return {"success": False, "error": f"no book matches {title}"}
        return {"success": True, "data": hits}

    def checkout_book(self, member_id: str, book_id: str) -> dict:
        """Lend a book to a member.

        Args:
            member_id: The member's id.
            book_id: The book's id.
        """
        if member_id not in self.members or book_id not in self.books:
            return {"success": False, "error": "unknown member or book"}
        active = [
            ln for ln in self.loans.values() if ln["member_id"] == member_id and ln["status"] == "active"
        ]
        if len(active) >= self.max_loans:
            return {"success": False, "error": "loan limit reached"}
        if self.books[book_id]["copies_available"] < 1:
            return {"success": False, "error": "no copy available"}
        lid = f"L{self.next_loan_no}"
        self.next_loan_no += 1
        self.loans[lid] = {"loan_id": lid, "member_id": member_id, "book_id": book_id, "status": "active"}
        self.books[book_id]["copies_available"] -= 1
        return {"success": True, "data": {"loan_id": lid, "status": "active"}}

    def place_hold(self, member_id: str, book_id: str) -> dict:
        """Reserve a book for a member to pick up later.

        Args:
            member_id: The member's id.
            book_id: The book's id.
        """
        if member_id not in self.members or book_id not in self.books:
            return {"success": False, "error": "unknown member or book"}
        self.holds.append({"member_id": member_id, "book_id": book_id})
        return {"success": True, "data": {"member_id": member_id, "book_id": book_id, "status": "on hold"}}


TITLES = (
    "River Song",
    "Glass Harbor",
    "The Quiet Fox",
    "Salt and Iron",
    "Night Orchard",
    "Paper Moons",
    "The Last Ferry",
    "Cold Lanterns",
    "Amber Roads",
    "Winter Atlas",
    "The Clockmaker",
    "Blue Hollow",
    "Stone Garden",
    "Silver Tide",
    "The Long Table",
    "Hidden Bells",
    "Copper Sky",
    "Small Hours",
    "Wild Thyme",
    "The North Gate",
    "Falling Maps",
    "Open Water",
    "Red Meridian",
    "The Lantern Keeper",
    "Echo Valley",
    "Iron Bloom",
    "Quiet Engines",
    "Sea of Reeds",
    "The Tin Crown",
    "Velvet Storm",
)


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 3)
    titles = v.sample("title", rng, 5)
    mids, bids = new_ids(rng, "M", 3), new_ids(rng, "B", 5)
    books = table("book_id", bids, title=titles, copies_available=[rng.randint(1, 3) for _ in bids])
    base = rng.randint(100, 900)
    cfg = {
        "members": table("member_id", mids, name=names),
        "books": books,
        "loans": {f"L{base - 1}": _loan(f"L{base - 1}", mids[1], bids[2])},  # someone else's loan
        "holds": [],
        "next_loan_no": base,
        "max_loans": 1,
    }
    if first_template(rng):
        return _swap_task(rng, cfg, names[0], mids[0], bids[:2])
    return _borrow_task(rng, cfg, names[0], mids[0], bids[1])


def _loan(loan_id: str, member_id: str, book_id: str) -> dict[str, str]:
    return {"loan_id": loan_id, "member_id": member_id, "book_id": book_id, "status": "active"}


def _borrow_checks(cfg: dict[str, Any], who: str, mid: str, want: str) -> list[dict[str, str]]:
    """The member has the wanted book on loan and one copy left the shelf."""
    new = rows("loans", member_id=mid, book_id=want, status="active")
    title, left = cfg["books"][want]["title"], cfg["books"][want]["copies_available"] - 1
    return [
        check(f"{who} has '{title}' on loan", f"return len({new}) > 0"),
        check(
            f"One copy of '{title}' left the shelf",
            f"return {cell('books', want, 'copies_available')} == {left}",
        ),
    ]


def _borrow_task(rng: random.Random, cfg: dict[str, Any], who: str, mid: str, want: str) -> TaskSpec:
    """The member, with no loan of their own, borrows a book."""
    texts = ("{member} wants to borrow '{borrow}'.", "Check out '{borrow}' for library member {member}.")
    params = {"member": who, "borrow": cfg["books"][want]["title"]}
    return task(rng, "borrow", texts, cfg, _borrow_checks(cfg, who, mid, want), params)


def _swap_task(rng: random.Random, cfg: dict[str, Any], who: str, mid: str, bids: list[str]) -> TaskSpec:
    """The member holds the one loan allowed (of ``bids[0]``): return it first, then borrow ``bids[1]``."""
    back_id, want = bids
    old = f"L{cfg['next_loan_no'] - 2}"
    cfg["loans"][old] = _loan(old, mid, back_id)
    back = cfg["books"][back_id]
    checks = [
        check(f"'{back['title']}' was returned", f"return {cell('loans', old, 'status')} == 'returned'"),
        check(
            f"'{back['title']}' is back on the shelf",
            f"return {cell('books', back_id, 'copies_available')} == {back['copies_available'] + 1}",
        ),
        *_borrow_checks(cfg, who, mid, want),
    ]
    texts = (
        "{member} is returning '{return}' and wants to borrow '{borrow}'.",
        "Member {member} brings back '{return}'; lend them '{borrow}' instead.",
    )
    params = {"member": who, "return": back["title"], "borrow": cfg["books"][want]["title"]}
    return task(rng, "swap", texts, cfg, checks, params)


def solve(p: dict[str, Any], mistake: str | None = None):
    r = yield "find_member", {"member": p["member"]}
    mid = first_data(r)["member_id"]
    if "return" in p and mistake != "checkout_first":
        r = yield "list_loans", {"member_id": mid}
        loan = next(x for x in r["data"] if x["title"] == p["return"])
        yield "return_book", {"loan_id": loan["loan_id"]}
    if mistake == "stop_early":
        return
    r = yield "search_catalog", {"title": p["borrow"]}
    book = next(b for b in r["data"] if b["title"] == p["borrow"])
    tool = "place_hold" if mistake == "hold_instead" else "checkout_book"
    yield tool, {"member_id": mid, "book_id": book["book_id"]}


DOMAIN = Domain(
    name="library",
    env_class=LibrarySystem,
    make_task=make_task,
    solve=solve,
    summary="A lending library with members, books and loans.",
    introduction="This environment is a lending library. It keeps members, the catalogue with the number "
    "of copies on the shelf, and loans.",
    rules=("A book can be lent only while a copy is on the shelf.", "Members borrow under a loan limit."),
    vocab={"title": TITLES},
    mistakes={
        "swap": ("checkout_first", "hold_instead", "stop_early"),
        "borrow": ("hold_instead", "stop_early"),
    },
    distractors=("place_hold",),
    expert_success=0.1,
    operations=operation_types(LibrarySystem, "return_book", "checkout_book", "place_hold"),
)
