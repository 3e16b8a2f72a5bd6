"""Calendar: people, rooms, events. Events are created empty; attendees are added one by one."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, first_data, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, rows, table, task


class CalendarSystem:
    """A team calendar with people, meeting rooms and events."""

    def __init__(self, init_config: dict):
        self.people: dict = {}
        self.rooms: dict = {}
        self.events: dict = {}
        self.reminders: list = []
        self.next_event_no: int = 1
        self.init_config = init_config

    def find_person(self, person: str) -> dict:
        """Find a person by full name, with their scheduled events.

        Args:
            person: The person's full name.
        """
        found = []
        for p in self.people.values():
            if p["name"] == person:
                evs = [
                    {"event_id": e["event_id"], "title": e["title"], "day": e["day"], "slot": e["slot"]}
                    for e in self.events.values()
                    if p["person_id"] in e["attendees"] and e["status"] == "scheduled"
                ]
                found.append({"person_id": p["person_id"], "name": p["name"], "events": evs})
        if not found:
            return {"success": False, "error": f"no person named {person}"}
        return {"success": True, "data": found}

    def find_free_room(self, day: str, slot: str, min_capacity: int) -> dict:
        """Rooms free at a time that hold at least min_capacity people.

        Args:
            day: Weekday, e.g. Monday.
            slot: Time slot, e.g. 10:00.
            min_capacity: Number of seats needed.
        """
        busy = {
            e["room_id"]
            for e in self.events.values()
            if e["day"] == day and e["slot"] == slot and e["status"] == "scheduled"
        }
        rooms = [
            dict(r) for r in self.rooms.values() if r["room_id"] not in busy and r["capacity"] >= min_capacity
        ]
        if not rooms:
            return {"success": False, "error": "no free room"}
        return {"success": True, "data": sorted(rooms, key=lambda r: r["capacity"])}

    def create_event(self, title: str, day: str, slot: str, room_id: str) -> dict:
        """Create an event in a room (no attendees yet).

        Args:
            title: Event title.
            day: Weekday.
            slot: Time slot.
            room_id: The room's id.
        """
        if room_id not in self.rooms:
            return {"success": False, "error": f"unknown room {room_id}"}
        for e in self.events.values():
            if (
                e["room_id"] == room_id
                and e["day"] == day
                and e["slot"] == slot
                and e["status"] == "scheduled"
            ):
                return {"success": False, "error": "room is taken"}
        eid = f"E{self.next_event_no}"
        self.next_event_no += 1
        self.events[eid] = {
            "event_id": eid,
            "title": title,
            "day": day,
            "slot": slot,
            "room_id": room_id,
            "attendees": [],
            "status": "scheduled",
        }
        return {"success": True, "data": {"event_id": eid}}

    def add_attendee(self, event_id: str, person_id: str) -> dict:
        """Invite a person to an event.

        Args:
            event_id: The event's id.
            person_id: The person's id.
        """
        e = self.events.get(event_id)
        if e is None or person_id not in self.people:
            return {"success": False, "error": "unknown event or person"}
        if person_id not in e["attendees"]:
            e["attendees"].append(person_id)
        return {"success": True, "data": {"event_id": event_id, "attendees": list(e["attendees"])}}

    def cancel_event(self, event_id: str) -> dict:
        """Cancel an event.

        Args:
            event_id: The event's id.
        """
        e = self.events.get(event_id)
        if e is None or e["status"] != "scheduled":
            return {"success": False, "error": f"no scheduled event {event_id}"}
        e["status"] = "cancelled"
        return {"success": True, "data": {"event_id": event_id, "status": "cancelled"}}

    def send_reminder(self, event_id: str) -> dict:
        """Send a reminder to an event's attendees.

        Args:
            event_id: The event's id.
        """
        if event_id not in self.events:
            return {"success": False, "error": f"unknown event {event_id}"}
        self.reminders.append(event_id)
        return {"success": True, "data": {"event_id": event_id, "sent": True}}


TITLES = (
    "budget review",
    "design sync",
    "hiring panel",
    "sprint demo",
    "client call",
    "offsite plan",
    "code review",
    "safety drill",
    "board prep",
    "launch retro",
    "vendor pitch",
    "team lunch",
    "quarterly sync",
    "roadmap talk",
    "data audit",
    "press briefing",
    "onboarding",
    "yoga break",
    "ux workshop",
    "ops standup",
    "tax prep",
    "book club",
    "party plan",
    "security review",
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
SLOTS = ("09:00", "10:00", "11:00", "14:00", "15:00", "16:00")


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    names = v.people(rng, 3)
    titles = v.sample("event", rng, 3)
    pids, rids = new_ids(rng, "U", 3), new_ids(rng, "R", 4)
    caps = sorted(rng.sample(range(2, 21), 4))
    day, slot = rng.choice(DAYS), rng.choice(SLOTS)
    cfg = {
        "people": table("person_id", pids, name=names),
        "rooms": table("room_id", rids, name=[f"Room {r[1:]}" for r in rids], capacity=caps),
        "events": {},
        "reminders": [],
        "next_event_no": rng.randint(100, 900),
    }
    if first_template(rng):
        return _schedule_task(rng, cfg, titles, day, slot)
    return _cancel_task(rng, cfg, titles[0], day, slot)


def _event(eid: str, title: str, day: str, slot: str, room_id: str, attendees: list[str]) -> dict[str, Any]:
    return {
        "event_id": eid,
        "title": title,
        "day": day,
        "slot": slot,
        "room_id": room_id,
        "attendees": attendees,
        "status": "scheduled",
    }


def _schedule_task(
    rng: random.Random, cfg: dict[str, Any], titles: list[str], day: str, slot: str
) -> TaskSpec:
    """The first person's event needs a room with enough seats that is free at that time."""
    pids, rooms = list(cfg["people"]), cfg["rooms"]
    caps = sorted(r["capacity"] for r in rooms.values())
    need = rng.randint(caps[0] + 1, caps[2])  # the smallest room is always too small
    # a room that would fit (the lowest id) is taken at that time by someone else's event
    fit = min(r for r in rooms if rooms[r]["capacity"] >= need)
    busy = f"E{cfg['next_event_no'] - 1}"
    cfg["events"] = {busy: _event(busy, titles[1], day, slot, fit, [pids[1]])}
    title, who = titles[0], cfg["people"][pids[0]]["name"]
    mine = rows("events", title=title, day=day, slot=slot, status="scheduled")
    caps_map = {r: rooms[r]["capacity"] for r in rooms}
    checks = [
        check(f"'{title}' is scheduled on {day} at {slot}", f"return len({mine}) > 0"),
        check(
            f"Its room seats {need}",
            f"return any({caps_map!r}.get(e['room_id'], 0) >= {need} for e in {mine})",
        ),
        check(
            "Its room is not double-booked",
            f"return len({mine}) > 0 and all(e['room_id'] != {fit!r} for e in {mine})",
        ),
        check(f"{who} is invited", f"return any({pids[0]!r} in e['attendees'] for e in {mine})"),
    ]
    texts = (
        "Book a room for '{title}' on {day} at {slot} for {seats} people and invite {person}.",
        "Set up '{title}' ({seats} seats) on {day} at {slot}; {person} must attend.",
    )
    params = {"person": who, "title": title, "day": day, "slot": slot, "seats": need}
    return task(rng, "schedule", texts, cfg, checks, params)


def _cancel_task(rng: random.Random, cfg: dict[str, Any], title: str, day: str, slot: str) -> TaskSpec:
    """The first person has the same meeting on two days; only the one on ``day`` is cancelled."""
    other_day = rng.choice([d for d in DAYS if d != day])
    pids, room = list(cfg["people"]), list(cfg["rooms"])[3]
    ids = [f"E{cfg['next_event_no'] - 2}", f"E{cfg['next_event_no'] - 1}"]
    cfg["events"] = {
        e: _event(e, title, d, slot, room, pids[:2]) for e, d in zip(ids, (day, other_day), strict=True)
    }
    cancelled = f"{cell('events', ids[0], 'status')} == 'cancelled'"
    checks = [
        check(f"'{title}' on {day} is cancelled", f"return {cancelled}"),
        check(
            f"'{title}' on {other_day} still takes place",
            f"return {cancelled} and {cell('events', ids[1], 'status')} == 'scheduled'",
        ),
    ]
    texts = (
        "Cancel {person}'s '{title}' on {day}.",
        "{person} says the '{title}' meeting on {day} is off; cancel it.",
    )
    who = cfg["people"][pids[0]]["name"]
    return task(rng, "cancel", texts, cfg, checks, {"person": who, "title": title, "day": day})


def solve(p: dict[str, Any], mistake: str | None = None):
    r = yield "find_person", {"person": p["person"]}
    person = first_data(r)
    if "seats" not in p:  # cancel
        ev = next(
            e
            for e in person["events"]
            if e["title"] == p["title"] and (e["day"] == p["day"]) != (mistake == "wrong_day")
        )
        yield "cancel_event", {"event_id": ev["event_id"]}
        return
    seats = 1 if mistake == "small_room" else p["seats"]
    r = yield "find_free_room", {"day": p["day"], "slot": p["slot"], "min_capacity": seats}
    if mistake == "stop_early":
        return
    r = yield (
        "create_event",
        {"title": p["title"], "day": p["day"], "slot": p["slot"], "room_id": r["data"][0]["room_id"]},
    )
    eid = r["data"]["event_id"]
    if mistake == "reminder_instead":
        yield "send_reminder", {"event_id": eid}
        return
    yield "add_attendee", {"event_id": eid, "person_id": person["person_id"]}


DOMAIN = Domain(
    name="calendar",
    env_class=CalendarSystem,
    make_task=make_task,
    solve=solve,
    summary="A team calendar with people, rooms and events.",
    introduction="This environment is a team calendar. It keeps people, meeting rooms with their number of "
    "seats, and events held in rooms at a weekday and time slot.",
    rules=("A room holds one event per day and slot.", "Only scheduled events can be cancelled."),
    vocab={"event": TITLES},
    mistakes={"schedule": ("small_room", "reminder_instead", "stop_early"), "cancel": ("wrong_day",)},
    distractors=("send_reminder",),
    expert_success=0.2,
    operations=operation_types(
        CalendarSystem, "create_event", "add_attendee", "cancel_event", "send_reminder"
    ),
)
