"""Travel: travellers, flights, bookings. A held seat is booked only once it is paid."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, first_data, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, rows, table, task


class TravelSystem:
    """A travel agency with travellers, flights and bookings."""

    def __init__(self, init_config: dict):
        self.travelers: dict = {}
        self.flights: dict = {}
        self.bookings: dict = {}
        self.next_booking_no: int = 1
        self.init_config = init_config

    def find_traveler(self, traveler: str) -> dict:
        """Find a traveller by full name, with their bookings.

        Args:
            traveler: The traveller's full name.
        """
        found = []
        for t in self.travelers.values():
            if t["name"] == traveler:
                bks = []
                for b in self.bookings.values():
                    if b["traveler_id"] == t["traveler_id"] and b["status"] != "cancelled":
                        f = self.flights[b["flight_id"]]
                        bks.append(
                            {
                                "booking_id": b["booking_id"],
                                "destination": f["destination"],
                                "day": f["day"],
                                "status": b["status"],
                            }
                        )
                found.append({"traveler_id": t["traveler_id"], "name": t["name"], "bookings": bks})
        if not found:
            return {"success": False, "error": f"no traveller named {traveler}"}
        return {"success": True, "data": found}

    def search_flights(self, origin: str, destination: str, day: str) -> dict:
        """Flights between two cities on a day.

        Args:
            origin: Departure city.
            destination: Arrival city.
            day: Weekday.
        """
        hits = [
            dict(f)
            for f in self.flights.values()
            if f["origin"] == origin
            and f["destination"] == destination
            and f["day"] == day
            and f["seats"] > 0
        ]
        if not hits:
            return {"success": False, "error": "no flights"}
        return {"success": True, "data": hits}

    def hold_seat(self, traveler_id: str, flight_id: str) -> dict:
        """Hold a seat on a flight for a traveller (unpaid).

        Args:
            traveler_id: The traveller's id.
            flight_id: The flight's id.
        """
        if traveler_id not in self.travelers or flight_id not in self.flights:
            return {"success": False, "error": "unknown traveller or flight"}
        if self.flights[flight_id]["seats"] < 1:
            return {"success": False, "error": "flight is full"}
        bid = f"K{self.next_booking_no}"
        self.next_booking_no += 1
        self.flights[flight_id]["seats"] -= 1
        self.bookings[bid] = {
            "booking_id": bid,
            "traveler_id": traveler_id,
            "flight_id": flight_id,
            "status": "held",
        }
        return {"success": True, "data": {"booking_id": bid, "status": "held"}}

    def pay_booking(self, booking_id: str) -> dict:
        """Pay for a held booking.

        Args:
            booking_id: The booking's id.
        """
        b = self.bookings.get(booking_id)
        if b is None or b["status"] != "held":
            return {"success": False, "error": f"no held booking {booking_id}"}
        b["status"] = "paid"
        return {"success": True, "data": {"booking_id": booking_id, "status": "paid"}}

    def cancel_booking(self, booking_id: str) -> dict:
        """Cancel a booking and free its seat.

        Args:
            booking_id: The booking's id.
        """
        b = self.bookings.get(booking_id)
        if b is None or b["status"] == "cancelled":
            return {"success": False, "error": f"no open booking {booking_id}"}
        b["status"] = "cancelled"
        self.flights[b["flight_id"]]["seats"] += 1
        return {"success": True, "data": {"booking_id": booking_id, "status": "cancelled"}}

    def get_weather(self, city: str) -> dict:
        """The weather forecast for a city.

        Args:
            city: The city.
        """
        return {
            "success": True,
            "data": {"city": city, "forecast": ["sunny", "rain", "cloudy"][len(city) % 3]},
        }


CITIES = (
    "Lisbon",
    "Oslo",
    "Cairo",
    "Lima",
    "Perth",
    "Quito",
    "Riga",
    "Seoul",
    "Tunis",
    "Vienna",
    "Dakar",
    "Hanoi",
    "Kyiv",
    "Minsk",
    "Nairobi",
    "Porto",
    "Sofia",
    "Tokyo",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 3)
    origin, dest, elsewhere = v.sample("city", rng, 3)
    tids, fids = new_ids(rng, "V", 3), new_ids(rng, "FL", 6)
    day, other_day = rng.sample(DAYS, 2)
    routes = [(origin, dest, day)] * 3 + [
        (origin, dest, other_day),
        (dest, origin, day),
        (origin, elsewhere, day),
    ]
    cfg = {
        "travelers": table("traveler_id", tids, name=names),
        "flights": _flights(rng, fids, routes),
        "bookings": {},
        "next_booking_no": rng.randint(100, 900),
    }
    if first_template(rng):
        return _book_task(rng, cfg, tids[0], fids[:3])
    return _cancel_task(rng, cfg, tids[0], fids[0], fids[3])


def _flights(
    rng: random.Random, fids: list[str], routes: list[tuple[str, str, str]]
) -> dict[str, dict[str, Any]]:
    """One flight per route with a random price and seats; of the first three (one route), the first
    listed is never the cheapest."""
    prices = rng.sample(range(80, 600, 5), len(fids))
    flights = {
        f: {"flight_id": f, "origin": o, "destination": d, "day": dd, "price": pr, "seats": rng.randint(2, 9)}
        for f, (o, d, dd), pr in zip(fids, routes, prices, strict=True)
    }
    same = fids[:3]
    if min(same, key=lambda f: flights[f]["price"]) == same[0]:
        flights[same[0]]["price"], flights[same[1]]["price"] = (
            flights[same[1]]["price"],
            flights[same[0]]["price"],
        )
    return flights


def _book_task(rng: random.Random, cfg: dict[str, Any], tid: str, same: list[str]) -> TaskSpec:
    """The traveller books and pays the cheapest of the flights ``same`` (one route and day)."""
    flight, who = cfg["flights"][same[0]], cfg["travelers"][tid]["name"]
    origin, dest, day = flight["origin"], flight["destination"], flight["day"]
    cheapest = min(same, key=lambda f: cfg["flights"][f]["price"])
    mine = rows("bookings", f"r['flight_id'] in {same!r} and r['status'] != 'cancelled'", traveler_id=tid)
    checks = [
        check(f"{who} has a seat from {origin} to {dest} on {day}", f"return len({mine}) > 0"),
        check(
            "It is the cheapest such flight",
            f"return any(b['flight_id'] == {cheapest!r} for b in {mine})",
        ),
        check("The booking is paid", f"return any(b['status'] == 'paid' for b in {mine})"),
    ]
    texts = (
        "Book the cheapest flight from {origin} to {destination} on {day} for {traveler}.",
        "{traveler} needs the lowest-priced {day} flight from {origin} to {destination}; book and pay it.",
    )
    params = {"traveler": who, "origin": origin, "destination": dest, "day": day}
    return task(rng, "book", texts, cfg, checks, params)


def _booking(booking_id: str, traveler_id: str, flight_id: str) -> dict[str, str]:
    return {"booking_id": booking_id, "traveler_id": traveler_id, "flight_id": flight_id, "status": "paid"}


def _cancel_task(rng: random.Random, cfg: dict[str, Any], tid: str, fid: str, other_fid: str) -> TaskSpec:
    """The traveller has paid bookings on ``fid`` and ``other_fid`` (same city, other days); the first
    is cancelled."""
    bids = [f"K{cfg['next_booking_no'] - 2}", f"K{cfg['next_booking_no'] - 1}"]
    cfg["bookings"] = {bids[0]: _booking(bids[0], tid, fid), bids[1]: _booking(bids[1], tid, other_fid)}
    flight, other_day = cfg["flights"][fid], cfg["flights"][other_fid]["day"]
    day, dest = flight["day"], flight["destination"]
    checks = [
        check(
            f"The {day} booking to {dest} is cancelled",
            f"return {cell('bookings', bids[0], 'status')} == 'cancelled'",
        ),
        check(
            f"The {other_day} booking still stands and the seat is free again",
            f"return {cell('bookings', bids[1], 'status')} == 'paid' and "
            f"{cell('flights', fid, 'seats')} == {flight['seats'] + 1}",
        ),
    ]
    texts = (
        "Cancel {traveler}'s {day} booking to {destination}.",
        "{traveler} will not fly to {destination} on {day}; cancel that booking.",
    )
    params = {"traveler": cfg["travelers"][tid]["name"], "destination": dest, "day": day}
    return task(rng, "cancel", texts, cfg, checks, params)


def solve(p: dict[str, Any], mistake: str | None = None):
    r = yield "find_traveler", {"traveler": p["traveler"]}
    trav = first_data(r)
    if "origin" not in p:  # cancel
        bk = next(
            b
            for b in trav["bookings"]
            if b["destination"] == p["destination"] and (b["day"] == p["day"]) != (mistake == "wrong_day")
        )
        yield "cancel_booking", {"booking_id": bk["booking_id"]}
        return
    if mistake == "weather_first":
        yield "get_weather", {"city": p["destination"]}
    r = yield "search_flights", {"origin": p["origin"], "destination": p["destination"], "day": p["day"]}
    pick = r["data"][0] if mistake == "first_listed" else min(r["data"], key=lambda f: f["price"])
    r = yield "hold_seat", {"traveler_id": trav["traveler_id"], "flight_id": pick["flight_id"]}
    if mistake in ("skip_payment", "weather_first"):
        return
    yield "pay_booking", {"booking_id": r["data"]["booking_id"]}


DOMAIN = Domain(
    name="travel",
    env_class=TravelSystem,
    make_task=make_task,
    solve=solve,
    summary="A travel agency with travellers, flights and bookings.",
    introduction="This environment is a travel agency. It keeps travellers, scheduled flights with "
    "prices and free seats, and the bookings made for travellers.",
    rules=("A seat can be held only on a flight with free seats.", "Cancelling a booking frees its seat."),
    vocab={"city": CITIES},
    mistakes={"book": ("first_listed", "skip_payment", "weather_first"), "cancel": ("wrong_day",)},
    distractors=("get_weather",),
    expert_success=0.25,
    operations=operation_types(TravelSystem, "hold_seat", "pay_booking", "cancel_booking"),
)
