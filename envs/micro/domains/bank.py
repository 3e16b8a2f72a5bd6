"""Bank: accounts and transfers. A transfer moves money only once it is authorized."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, check, new_ids, rows


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


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 3)
    ids = new_ids(rng, "A", 6)
    accounts = {}
    for i, name in enumerate(names):
        for j, kind in enumerate(("checking", "savings")):
            aid = ids[2 * i + j]
            accounts[aid] = {
                "account_id": aid,
                "owner": name,
                "kind": kind,
                "balance": rng.randint(20, 200) * 10,
                "frozen": False,
            }
    by = {(a["owner"], a["kind"]): a["account_id"] for a in accounts.values()}
    cfg = {"accounts": accounts, "transfers": {}, "next_transfer_no": rng.randint(100, 900)}
    a_name, b_name = names[0], names[1]
    if rng.random() < 0.6:
        ka, kb = rng.choice(("checking", "savings")), rng.choice(("checking", "savings"))
        src, dst = by[(a_name, ka)], by[(b_name, kb)]
        amount = rng.randint(1, accounts[src]["balance"] // 10 - 1) * 10
        text = rng.choice(
            [
                "Move ${m} from {a}'s {ka} account to {b}'s {kb} account.",
                "{a} wants to send ${m} from their {ka} account to the {kb} account of {b}.",
            ]
        )
        mine = rows("transfers", from_account=src, to_account=dst, amount=amount)
        checks = [
            check(
                f"A transfer of ${amount} from {a_name}'s {ka} to {b_name}'s {kb} exists",
                f"return len({mine}) > 0",
            ),
            check("The transfer is completed", f"return any(t['status'] == 'completed' for t in {mine})"),
            check(
                f"{a_name}'s {ka} balance went down by {amount}",
                f"return final_state['accounts'][{src!r}]['balance'] == {accounts[src]['balance'] - amount}",
            ),
            check(
                f"{b_name}'s {kb} balance went up by {amount}",
                f"return final_state['accounts'][{dst!r}]['balance'] == {accounts[dst]['balance'] + amount}",
            ),
        ]
        return TaskSpec(
            "transfer",
            text.format(m=amount, a=a_name, ka=ka, b=b_name, kb=kb),
            cfg,
            checks,
            {"from_owner": a_name, "from_kind": ka, "to_owner": b_name, "to_kind": kb, "amount": amount},
        )
    kind = rng.choice(("checking", "savings"))
    reason = v.sample("reason", rng, 1)[0]
    target, other = by[(a_name, kind)], by[(a_name, "savings" if kind == "checking" else "checking")]
    text = rng.choice(
        ["Freeze {a}'s {k} account; the reason is {r}.", "Because of {r}, {a}'s {k} account must be frozen."]
    )
    checks = [
        check(
            f"{a_name}'s {kind} account is frozen",
            f"return final_state['accounts'][{target!r}]['frozen'] is True",
        ),
        check(
            f"The freeze reason is '{reason}'",
            f"return final_state['accounts'][{target!r}].get('freeze_reason') == {reason!r}",
        ),
        check(
            f"{a_name}'s other account is not frozen",
            f"return final_state['accounts'][{target!r}]['frozen'] is True "
            f"and final_state['accounts'][{other!r}]['frozen'] is False",
        ),
    ]
    return TaskSpec(
        "freeze",
        text.format(a=a_name, k=kind, r=reason),
        cfg,
        checks,
        {"owner": a_name, "kind": kind, "reason": reason},
    )


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
    operations={
        "lookup_accounts": "query",
        "create_transfer": "state_change",
        "authorize_transfer": "state_change",
        "freeze_account": "state_change",
        "get_exchange_rate": "query",
        "request_statement": "query",
    },
)
