"""Bank: accounts and transfers. A transfer moves money only once it is authorized."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, rows, table, task


class BankSystem:
    """A retail bank with customer accounts and transfers between them."""

    def __init__(self, init_config: dict):
        self.accounts: dict = {}
        self.transfers: dict = {}
        self.next_transfer_no: int = 1
        self.init_config = init_config

    def lookup_accounts(self, owner: str) -> dict:
        """List the accounts of an account holder.

        Args:
            owner: The holder's full name.
        """
        found = [dict(a) for a in self.accounts.values() if a["owner"] == owner]
        if not found:
            return {"success": False, "error": f"no accounts for {owner}"}
        return {"success": True, "data": found}

    def create_transfer(self, from_account: str, to_account: str, amount: int) -> dict:
        """Create a transfer between two accounts (pending until authorized).

        Args:
            from_account: Paying account id.
            to_account: Receiving account id.
            amount: Amount in dollars.
        """
        for a in (from_account, to_account):
            if a not in self.accounts:
                return {"success": False, "error": f"unknown account {a}"}
            if self.accounts[a]["frozen"]:
                return {"success": False, "error": f"account {a} is frozen"}
        if amount <= 0 or amount > self.accounts[from_account]["balance"]:
            return {"success": False, "error": "invalid amount"}
        tid = f"T{self.next_transfer_no}"
        self.next_transfer_no += 1
        self.transfers[tid] = {
            "transfer_id": tid,
            "from_account": from_account,
            "to_account": to_account,
            "amount": amount,
            "status": "pending",
        }
        return {"success": True, "data": {"transfer_id": tid, "status": "pending"}}

    def authorize_transfer(self, transfer_id: str) -> dict:
        """Authorize a pending transfer, which moves the money.

        Args:
            transfer_id: The transfer's id.
        """
        t = self.transfers.get(transfer_id)
        if t is None or t["status"] != "pending":
            return {"success": False, "error": f"no pending transfer {transfer_id}"}
        if t["amount"] > self.accounts[t["from_account"]]["balance"]:
            return {"success": False, "error": "insufficient funds"}
        self.accounts[t["from_account"]]["balance"] -= t["amount"]
        self.accounts[t["to_account"]]["balance"] += t["amount"]
        t["status"] = "completed"
        return {"success": True, "data": {"transfer_id": transfer_id, "status": "completed"}}

    def freeze_account(self, account_id: str, reason: str) -> dict:
        """Freeze an account.

        Args:
            account_id: The account's id.
            reason: Why it is frozen.
        """
        a = self.accounts.get(account_id)
        if a is None:
            return {"success": False, "error": f"unknown account {account_id}"}
        a["frozen"], a["freeze_reason"] = True, reason
        return {"success": True, "data": {"account_id": account_id, "frozen": True}}

    def get_exchange_rate(self, currency: str) -> dict:
        """Today's exchange rate from dollars to a currency.

        Args:
            currency: A currency code such as EUR.
        """
        rates = {"EUR": 0.92, "GBP": 0.79, "JPY": 151.2, "CHF": 0.88}
        if currency not in rates:
            return {"success": False, "error": f"unknown currency {currency}"}
        return {"success": True, "data": {"currency": currency, "rate": rates[currency]}}

    def request_statement(self, account_id: str) -> dict:
        """The transfers of an account.

        Args:
            account_id: The account's id.
        """
        if account_id not in self.accounts:
            return {"success": False, "error": f"unknown account {account_id}"}
        rows = [
            dict(t) for t in self.transfers.values() if account_id in (t["from_account"], t["to_account"])
        ]
        return {"success": True, "data": rows}


REASONS = (
    "lost card",
    "suspected fraud",
    "customer request",
    "stolen wallet",
    "unusual activity",
    "travel abroad",
    "identity check",
    "court order",
    "disputed charge",
)


KINDS = ("checking", "savings")


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 3)
    cfg = {"accounts": _accounts(rng, names), "transfers": {}, "next_transfer_no": rng.randint(100, 900)}
    if first_template(rng):
        return _transfer_task(rng, cfg, names[0], names[1])
    return _freeze_task(rng, v, cfg, names[0])


def _accounts(rng: random.Random, names: list[str]) -> dict[str, dict[str, Any]]:
    """A checking and a savings account per holder, each with a random balance."""
    ids = new_ids(rng, "A", len(KINDS) * len(names))
    return table(
        "account_id",
        ids,
        owner=[name for name in names for _ in KINDS],
        kind=KINDS * len(names),
        balance=[rng.randint(20, 200) * 10 for _ in ids],
        frozen=[False] * len(ids),
    )


def _account_of(accounts: dict[str, dict[str, Any]], owner: str, kind: str) -> str:
    return next(a["account_id"] for a in accounts.values() if (a["owner"], a["kind"]) == (owner, kind))


def _transfer_task(rng: random.Random, cfg: dict[str, Any], a_name: str, b_name: str) -> TaskSpec:
    """Money moves from one holder's account to another's: create, then authorize."""
    accounts = cfg["accounts"]
    ka, kb = rng.choice(KINDS), rng.choice(KINDS)
    src, dst = _account_of(accounts, a_name, ka), _account_of(accounts, b_name, kb)
    amount = rng.randint(1, accounts[src]["balance"] // 10 - 1) * 10
    mine = rows("transfers", from_account=src, to_account=dst, amount=amount)
    checks = [
        check(
            f"A transfer of ${amount} from {a_name}'s {ka} to {b_name}'s {kb} exists",
            f"return len({mine}) > 0",
        ),
        check("The transfer is completed", f"return any(t['status'] == 'completed' for t in {mine})"),
        check(
            f"{a_name}'s {ka} balance went down by {amount}",
            f"return {cell('accounts', src, 'balance')} == {accounts[src]['balance'] - amount}",
        ),
        check(
            f"{b_name}'s {kb} balance went up by {amount}",
            f"return {cell('accounts', dst, 'balance')} == {accounts[dst]['balance'] + amount}",
        ),
    ]
    texts = (
        "Move ${amount} from {from_owner}'s {from_kind} account to {to_owner}'s {to_kind} account.",
        (
            "{from_owner} wants to send ${amount} from their {from_kind} account "
            "to the {to_kind} account of {to_owner}."
        ),
    )
    params = {"from_owner": a_name, "from_kind": ka, "to_owner": b_name, "to_kind": kb, "amount": amount}
    return task(rng, "transfer", texts, cfg, checks, params)


def _freeze_task(rng: random.Random, v: Vocab, cfg: dict[str, Any], owner: str) -> TaskSpec:
    """One of the holder's two accounts is frozen, with a reason."""
    kind = rng.choice(KINDS)
    reason = v.sample("reason", rng, 1)[0]
    other_kind = "savings" if kind == "checking" else "checking"
    target, other = _account_of(cfg["accounts"], owner, kind), _account_of(cfg["accounts"], owner, other_kind)
    frozen = f"{cell('accounts', target, 'frozen')} is True"
    checks = [
        check(f"{owner}'s {kind} account is frozen", f"return {frozen}"),
        check(
            f"The freeze reason is '{reason}'",
            f"return final_state['accounts'][{target!r}].get('freeze_reason') == {reason!r}",
        ),
        check(
            f"{owner}'s other account is not frozen",
            f"return {frozen} and {cell('accounts', other, 'frozen')} is False",
        ),
    ]
    texts = (
        "Freeze {owner}'s {kind} account; the reason is {reason}.",
        "Because of {reason}, {owner}'s {kind} account must be frozen.",
    )
    return task(rng, "freeze", texts, cfg, checks, {"owner": owner, "kind": kind, "reason": reason})


def _account(result: dict, kind: str, wrong: bool = False) -> str:
    return next(a["account_id"] for a in result["data"] if (a["kind"] == kind) != wrong)


def solve(p: dict[str, Any], mistake: str | None = None):
    if "reason" in p:
        r = yield "lookup_accounts", {"owner": p["owner"]}
        reason = "requested" if mistake == "wrong_reason" else p["reason"]
        yield (
            "freeze_account",
            {"account_id": _account(r, p["kind"], mistake == "wrong_account"), "reason": reason},
        )
        return
    r = yield "lookup_accounts", {"owner": p["from_owner"]}
    src = _account(r, p["from_kind"], mistake == "wrong_account")
    r = yield "lookup_accounts", {"owner": p["to_owner"]}
    dst = _account(r, p["to_kind"])
    if mistake == "stop_early":
        yield "request_statement", {"account_id": src}
        return
    r = yield "create_transfer", {"from_account": src, "to_account": dst, "amount": p["amount"]}
    if mistake == "skip_authorize" or not r["success"]:
        return
    yield "authorize_transfer", {"transfer_id": r["data"]["transfer_id"]}


DOMAIN = Domain(
    name="bank",
    env_class=BankSystem,
    make_task=make_task,
    solve=solve,
    summary="A bank with accounts, transfers and account freezes.",
    introduction="This environment is a retail bank. Each holder has a checking and a savings account; "
    "money moves between accounts through transfers.",
    rules=(
        "Frozen accounts cannot send or receive transfers.",
        "A transfer cannot exceed the paying balance.",
    ),
    vocab={"reason": REASONS},
    mistakes={
        "transfer": ("skip_authorize", "wrong_account", "stop_early"),
        "freeze": ("wrong_account", "wrong_reason"),
    },
    distractors=("get_exchange_rate", "request_statement"),
    expert_success=0.15,
    operations=operation_types(BankSystem, "create_transfer", "authorize_transfer", "freeze_account"),
)
