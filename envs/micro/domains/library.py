"""Library: members, books, loans. A member may hold one loan at a time."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, check, first_data, new_ids, rows


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
    members = {m: {"member_id": m, "name": n} for m, n in zip(mids, names, strict=True)}
    books = {
        b: {"book_id": b, "title": t, "copies_available": rng.randint(1, 3)}
        for b, t in zip(bids, titles, strict=True)
    }
    base = rng.randint(100, 900)
    who, mid, want = names[0], mids[0], bids[1]
    loans = {
        f"L{base - 1}": {
            "loan_id": f"L{base - 1}",
            "member_id": mids[1],
            "book_id": bids[2],
            "status": "active",
        }
    }
    swap = rng.random() < 0.6
    if swap:
        loans[f"L{base - 2}"] = {
            "loan_id": f"L{base - 2}",
            "member_id": mid,
            "book_id": bids[0],
            "status": "active",
        }
    cfg = {
        "members": members,
        "books": books,
        "loans": loans,
        "holds": [],
        "next_loan_no": base,
        "max_loans": 1,
    }
    new = rows("loans", member_id=mid, book_id=want, status="active")
    left, back = books[want]["copies_available"] - 1, books[bids[0]]["copies_available"] + 1
    borrow = [
        check(f"{who} has '{titles[1]}' on loan", f"return len({new}) > 0"),
        check(
            f"One copy of '{titles[1]}' left the shelf",
            f"return final_state['books'][{want!r}]['copies_available'] == {left}",
        ),
    ]
    if not swap:
        text = rng.choice(["{m} wants to borrow '{t}'.", "Check out '{t}' for library member {m}."])
        return TaskSpec(
            "borrow", text.format(m=who, t=titles[1]), cfg, borrow, {"member": who, "borrow": titles[1]}
        )
    old = f"L{base - 2}"
    text = rng.choice(
        [
            "{m} is returning '{r}' and wants to borrow '{t}'.",
            "Member {m} brings back '{r}'; lend them '{t}' instead.",
        ]
    )
    checks = [
        check(f"'{titles[0]}' was returned", f"return final_state['loans'][{old!r}]['status'] == 'returned'"),
        check(
            f"'{titles[0]}' is back on the shelf",
            f"return final_state['books'][{bids[0]!r}]['copies_available'] == {back}",
        ),
        *borrow,
    ]
    return TaskSpec(
        "swap",
        text.format(m=who, r=titles[0], t=titles[1]),
        cfg,
        checks,
        {"member": who, "return": titles[0], "borrow": titles[1]},
    )


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
    operations={
        "find_member": "query",
        "list_loans": "query",
        "return_book": "state_change",
        "search_catalog": "query",
        "checkout_book": "state_change",
        "place_hold": "state_change",
    },
)
