"""Travel: three users, eleven flights and four reservations; book, modify and cancel flights.

From the function docs and the stored final states: a booking charges the cabin price plus 50
yuan per bag above the free allowance (by membership and cabin) to cash or bank and appends
``res_<n+1>``; a modification may change the flight (same route only), the cabin (the price
difference is taken from the *current* flight and paid or refunded through the payment method)
and add bags. Cancelling refunds to cash (in full for an airline cancellation or more than 24 h
before departure, else minus 10%) but leaves the reservation in place. "Now" is 2024-07-14 06:00.

Upstream behaviours kept because they decide states and errors: authentication failures still
return a truthy dict, so a wrong password or unknown flight surfaces as a raised KeyError/TypeError;
flights match by number only (two flights share ``CZ1765`` and two ``MH2616``; the first wins);
seat counts are decremented but never checked.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

CITIES = {
    "Beijing": "北京",
    "Shanghai": "上海",
    "Nanjing": "南京",
    "Shenzhen": "深圳",
    "Xiamen": "厦门",
    "Chengdu": "成都",
    "Fuzhou": "福州",
}
CABINS = {"en": ("Economy Class", "Business Class"), "zh": ("经济舱", "商务舱")}
AIRLINE_CANCEL_REASON = {"en": "The airline has canceled the flight.", "zh": "航空公司取消航班"}
NOW = datetime(2024, 7, 14, 6, 0, 0)

# flight_no, origin, destination, depart, arrive, seats, economy, business
FLIGHTS = [
    ("CA1234", "Beijing", "Shanghai", "2024-07-15 08:00:00", "2024-07-15 10:30:00", 5, 1200, 3000),
    ("MU5678", "Shanghai", "Beijing", "2024-07-16 09:00:00", "2024-07-16 11:30:00", 3, 1900, 3000),
    ("CZ4321", "Shanghai", "Beijing", "2024-07-16 20:00:00", "2024-07-16 22:00:00", 8, 2500, 4000),
    ("CZ4352", "Shanghai", "Beijing", "2024-07-17 20:00:00", "2024-07-17 22:00:00", 8, 1600, 2500),
    ("MU3561", "Beijing", "Nanjing", "2024-07-18 08:00:00", "2024-07-18 10:00:00", 8, 1500, 4000),
    ("MU1566", "Beijing", "Nanjing", "2024-07-18 20:00:00", "2024-07-18 22:00:00", 8, 1500, 4000),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-17 20:30:00", "2024-07-17 22:00:00", 8, 1500, 2500),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-18 12:30:00", "2024-07-18 15:00:00", 8, 1500, 2500),
    ("MH1765", "Xiamen", "Chengdu", "2024-07-17 12:30:00", "2024-07-17 15:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Xiamen", "2024-07-18 18:30:00", "2024-07-18 21:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Fuzhou", "2024-07-16 18:30:00", "2024-07-16 21:00:00", 8, 1500, 2500),
]
# reservation id, user, flight, economy?, origin, destination (all paid by bank with one bag)
RESERVATIONS = [
    ("res_1", "user1", "CA1234", True, "Beijing", "Shanghai"),
    ("res_2", "user1", "MU5678", False, "Shanghai", "Beijing"),
    ("res_3", "user2", "MH1765", False, "Xiamen", "Chengdu"),
    ("res_4", "user2", "MU2616", False, "Chengdu", "Xiamen"),
]
USERS = {
    "user1": {
        "user_name": "Eve",
        "password": "password123",
        "cash_balance": 2000.0,
        "bank_balance": 50000.0,
        "membership_level": "regular",
    },
    "user2": {
        "user_name": "Frank",
        "password": "password456",
        "cash_balance": 8000.0,
        "bank_balance": 8000.0,
        "membership_level": "silver",
    },
    "user3": {
        "user_name": "Grace",
        "password": "password789",
        "cash_balance": 1000.0,
        "bank_balance": 5000.0,
        "membership_level": "gold",
    },
}
FREE_BAGS = {"regular": (1, 2), "silver": (2, 3), "gold": (3, 3)}  # (economy, business)
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

TEXT = {
    "en": {
        "no_direct": "There are no direct flights that meet the criteria.",
        "bad_login": "Incorrect username or password.",
        "need_id": "Please provide a valid reservation ID or user ID",
        "no_transfer": "No connecting flights that meet the criteria were found.",
        "bad_payment": "Invalid payment method",
        "poor_cash": "Your cash balance is insufficient. Please consider using another payment method.",
        "poor_bank": "Your bank balance is insufficient. Please consider using another payment method.",
        "booked": "Booking successful. Reservation ID: {rid}. Total cost: {cost} yuan (including baggage "
        "fees).",
        "no_reservation": "Reservation not found or user ID does not match.",
        "no_flight": "Flight information not found.",
        "changed": "Flight number has been changed.",
        "bad_change": "Flight change failed: Invalid new flight number or destination does not match.",
        "cabin_paid": "Cabin change successful. Price difference paid: {diff}.",
        "cabin_poor": "Insufficient balance to pay the cabin price difference.",
        "cabin_refund": "Cabin change successful. Price difference refunded: {diff}.",
        "bags_paid": "Baggage has been added. Additional fee to be paid: {cost}.",
        "bags_poor": "Insufficient balance to pay the additional baggage fees.",
        "no_fee": "Modification completed with no additional fees.",
        "bad_user": "Invalid user ID.",
        "not_yours": "Invalid reservation ID or it does not belong to the user.",
        "bad_flight": "Invalid flight information.",
        "used": "The flight segment has been used and cannot be canceled.",
        "airline": "The flight has been canceled. Your reservation will be canceled free of charge, and "
        "{amount} "
        "yuan has been refunded.",
        "free": "More than 24 hours before departure. Free cancellation successful, {amount} yuan has been "
        "refunded.",
        "fee": "Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, and "
        "{amount} yuan has been refunded.",
    },
    "zh": {
        "no_direct": "没有符合条件的直达航班",
        "bad_login": "用户名或密码不正确",
        "need_id": "请提供有效的预订ID或用户ID",
        "no_transfer": "未找到符合条件的中转航班。",
        "bad_payment": "支付方式无效",
        "poor_cash": "cash余额不足，请考虑换一种支付方式",
        "poor_bank": "bank余额不足，请考虑换一种支付方式",
        "booked": "预订成功，预订号：{rid}，总费用：{cost}元（包含行李费用）。",
        "no_reservation": "预订未找到或用户ID不匹配。",
        "no_flight": "航班信息未找到。",
        "changed": "航班号已更改。",
        "bad_change": "航班更改失败：新的航班号无效或目的地不匹配。",
        "cabin_paid": "舱位更改成功。已支付差价: {diff}。",
        "cabin_poor": "余额不足，无法支付舱位差价。",
        "cabin_refund": "舱位更改成功。已退款差价: {diff}。",
        "bags_paid": "行李已增加。需支付额外费用: {cost}。",
        "bags_poor": "余额不足，无法支付额外行李费用。",
        "no_fee": "修改完成，无需额外费用。",
        "bad_user": "用户ID无效。",
        "not_yours": "预订ID无效或与该用户无关。",
        "bad_flight": "航班信息无效。",
        "used": "航段已使用，无法取消。",
        "airline": "航班已取消，您的预订将被免费取消，已退款{amount}元。",
        "free": "距离出发时间超过24小时，免费取消成功，已退款{amount}元。",
        "fee": "距离出发时间不足24小时，已扣除取消费{fee}元，退款{amount}元。",
    },
}


class Travel:
    """Flight search, booking, modification and cancellation for three users."""

    def __init__(self, language: str = "en"):
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        self._language = language
        city = (lambda c: CITIES[c]) if language == "zh" else (lambda c: c)
        economy, business = CABINS[language]
        self.users = copy.deepcopy(USERS)
        self.flights = [
            {
                "flight_no": no,
                "origin": city(o),
                "destination": city(d),
                "depart_time": dep,
                "arrival_time": arr,
                "status": "available",
                "seats_available": seats,
                "economy_price": eco,
                "business_price": bus,
            }
            for no, o, d, dep, arr, seats, eco, bus in FLIGHTS
        ]
        self.reservations = [
            {
                "reservation_id": rid,
                "user_id": uid,
                "flight_no": no,
                "payment_method": "bank",
                "cabin": economy if eco else business,
                "baggage": 1,
                "origin": city(o),
                "destination": city(d),
            }
            for rid, uid, no, eco, o, d in RESERVATIONS
        ]

    def _t(self, key: str, **fmt: Any) -> str:
        return TEXT[self._language][key].format(**fmt)

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        """Travel ignores ``initial_config``."""

    def _cabin_index(self, cabin: Any) -> int:
        cabins = CABINS[self._language]
        if cabin not in cabins:
            raise KeyError(cabin)  # upstream indexes a {cabin: ...} dict
        return cabins.index(cabin)

    # ---- queries ---------------------------------------------------------------------------
    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> Any:
        """Flights filtered by origin and/or destination."""
        flights = [
            f
            for f in self.flights
            if (not origin or f["origin"] == origin) and (not destination or f["destination"] == destination)
        ]
        if not flights:
            return self._t("no_direct")
        return [dict(f) for f in flights]

    def get_user_details(self, user_id: str, password: str) -> dict:
        """A user's profile without the password."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return {"status": "error", "message": self._t("bad_login")}

    def get_reservation_details(self, reservation_id: str | None = None, user_id: str | None = None) -> Any:
        """Reservations by reservation ID (checked first) or user ID, each with its flight."""
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": self._t("need_id")}
        return [{**r, "flight_info": self._flight(r["flight_no"])} for r in found]

    def _flight(self, flight_no: Any) -> dict | None:
        return next((f for f in self.flights if f["flight_no"] == flight_no), None)

    def _reservation_and_flight(self, reservation_id: Any, user_id: Any) -> tuple[dict | None, dict | None]:
        """The reservation with this ID if it belongs to this user, and its flight (None for none)."""
        res = next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )
        return res, (self._flight(res["flight_no"]) if res else None)

    def authenticate_user(self, user_id, password):
        """The user record when the password matches, else an error dict (truthy)."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return user
        return {"status": "error", "message": self._t("bad_login")}

    def get_baggage_allowance(self, membership_level, cabin_class):
        """Free checked bags for a membership level and cabin (0 when unknown)."""
        allowance = FREE_BAGS.get(membership_level)
        if allowance is None or cabin_class not in CABINS[self._language]:
            return 0
        return allowance[self._cabin_index(cabin_class)]

    def find_transfer_flights(self, origin_city, transfer_city, destination_city):
        """Pairs of available flights via a transfer city where the first lands before the second leaves."""
        first = [
            f
            for f in self.flights
            if f["origin"] == origin_city and f["destination"] == transfer_city and f["status"] == "available"
        ]
        second = [
            f
            for f in self.flights
            if f["origin"] == transfer_city
            and f["destination"] == destination_city
            and f["status"] == "available"
        ]
        pairs = [
            {"first_leg": a, "second_leg": b}
            for a in first
            for b in second
            if datetime.strptime(a["arrival_time"], TIME_FORMAT)
            < datetime.strptime(b["depart_time"], TIME_FORMAT)
        ]
        return pairs if pairs else self._t("no_transfer")

    def calculate_baggage_fee(self, membership_level, cabin_class, baggage_count):
        """50 yuan per bag above the free allowance (KeyError/ValueError for unknown levels or cabins)."""
        free = FREE_BAGS[membership_level][self._cabin_index(cabin_class)]
        return max(baggage_count - free, 0) * 50

    def update_balance(self, user, payment_method, amount):
        """Add ``amount`` to the user's cash or bank balance; False if it would go negative."""
        key = {"cash": "cash_balance", "bank": "bank_balance"}.get(payment_method)
        if key is not None:
            if user[key] + amount < 0:
                return False
            user[key] += amount
        return True

    # ---- bookings --------------------------------------------------------------------------
    def reserve_flight(self, user_id, password, flight_no, cabin, payment_method, baggage_count):
        """Book a flight, paying the fare and extra-bag fees by cash or bank."""
        user = self.authenticate_user(user_id, password)
        flight = next(
            (f for f in self.flights if f["flight_no"] == flight_no and f["status"] == "available"), None
        )
        price = flight["economy_price"] if cabin == CABINS[self._language][0] else flight["business_price"]
        total = price + self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ("cash", "bank"):
            return self._t("bad_payment")
        key = f"{payment_method}_balance"
        if total > self.users.get(user_id)[key]:
            return self._t("poor_cash" if payment_method == "cash" else "poor_bank")
        self.users.get(user_id)[key] -= total
        flight["seats_available"] -= 1
        rid = f"res_{len(self.reservations) + 1}"
        self.reservations.append(
            {
                "reservation_id": rid,
                "user_id": user_id,
                "flight_no": flight_no,
                "payment_method": payment_method,
                "cabin": cabin,
                "baggage": baggage_count,
            }
        )
        return self._t("booked", rid=rid, cost=total)

    def modify_flight(
        self,
        user_id,
        reservation_id,
        new_flight_no=None,
        new_cabin=None,
        add_baggage=0,
        new_payment_method=None,
    ):
        """Change a reservation's flight (same route), cabin and/or add bags."""
        res, current = self._reservation_and_flight(reservation_id, user_id)
        if not res:
            return self._t("no_reservation")
        if not current:
            return self._t("no_flight")
        payment = new_payment_method if new_payment_method else res["payment_method"]
        user = self.users[user_id]
        notes = []
        if new_flight_no and new_flight_no != res["flight_no"]:
            new = self._flight(new_flight_no)
            if not (
                new and new["origin"] == current["origin"] and new["destination"] == current["destination"]
            ):
                return self._t("bad_change")
            res["flight_no"] = new_flight_no
            notes.append(self._t("changed"))
        if new_cabin and new_cabin != res.get("cabin"):
            diff = self._price_difference(current, res["cabin"], new_cabin)
            res["cabin"] = new_cabin
            if diff > 0:
                ok = self.update_balance(user, payment, -diff)
                notes.append(self._t("cabin_paid", diff=diff) if ok else self._t("cabin_poor"))
            elif diff < 0:
                self.update_balance(user, payment, -diff)
                notes.append(self._t("cabin_refund", diff=-diff))
        if add_baggage > 0:
            total_bags = res.get("baggage", 0) + add_baggage
            cost = (
                max(0, total_bags - self.get_baggage_allowance(user["membership_level"], res["cabin"])) * 50
            )
            if cost > 0:
                ok = self.update_balance(user, payment, -cost)
                notes.append(self._t("bags_paid", cost=cost) if ok else self._t("bags_poor"))
            res["baggage"] = total_bags
        return " ".join(notes) if notes else self._t("no_fee")

    def cancel_reservation(self, user_id, reservation_id, reason):
        """Refund a reservation to cash (the reservation itself stays listed)."""
        user = self.users.get(user_id, None)
        if not user:
            return self._t("bad_user")
        res, flight = self._reservation_and_flight(reservation_id, user_id)
        if not res:
            return self._t("not_yours")
        if not flight:
            return self._t("bad_flight")
        depart = datetime.strptime(flight["depart_time"], TIME_FORMAT)
        if NOW > depart:
            return self._t("used")
        price = (
            flight["economy_price"] if res["cabin"] == CABINS[self._language][0] else flight["business_price"]
        )
        if reason == AIRLINE_CANCEL_REASON[self._language]:
            self.process_refund(user, price)
            return self._t("airline", amount=price)
        if depart - NOW > timedelta(days=1):
            self.process_refund(user, price)
            return self._t("free", amount=price)
        fee = price * 0.1
        self.process_refund(user, price - fee)
        return self._t("fee", fee=fee, amount=price - fee)

    def process_refund(self, user, amount):
        """Add a refund to the user's cash balance."""
        user["cash_balance"] += amount

    def calculate_price_difference(self, flight, old_cabin, new_cabin):
        """New cabin price minus old cabin price on one flight (unknown cabins count 0)."""
        return self._price_difference(flight, old_cabin, new_cabin)

    def _price_difference(self, flight, old_cabin, new_cabin):
        economy, business = CABINS[self._language]
        prices = {economy: flight["economy_price"], business: flight["business_price"]}
        return prices.get(new_cabin, 0) - prices.get(old_cabin, 0)
