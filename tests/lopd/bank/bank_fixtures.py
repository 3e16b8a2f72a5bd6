"""Realistic episodes for the experience-bank tests (imported by conftest and the tests)."""

from __future__ import annotations

from envs.trace import CallRecord, Episode, Step

# Distinct everyday tasks, each with a paraphrase that should retrieve it.
TASKS = {
    "flight": ("Book a flight from Paris to Berlin on May 3 for one adult passenger.",
               "I need a plane ticket to travel from Paris to Berlin in early May.",
               [("search_flights", {"origin": "Paris", "destination": "Berlin", "date": "2025-05-03"},
                 '{"flights": [{"id": "AF12", "price": 129}, {"id": "LH9", "price": 145}]}'),
                ("book_flight", {"flight_id": "AF12", "passengers": 1}, '{"status": "booked", "pnr": "X7Q2"}')]),
    "refund": ("Cancel order number 5512 and refund the payment to the customer's card.",
               "Please cancel my purchase 5512 and give me my money back.",
               [("get_order", {"order_id": 5512}, '{"order_id": 5512, "status": "paid", "total": 42.5}'),
                ("cancel_order", {"order_id": 5512, "refund": True}, '{"status": "cancelled", "refunded": 42.5}')]),
    "weather": ("What will the weather be like in Tokyo tomorrow? Give the temperature in Celsius.",
                "Tell me tomorrow's forecast and temperature for Tokyo, Japan.",
                [("get_forecast", {"city": "Tokyo", "days": 1, "unit": "celsius"},
                  '{"city": "Tokyo", "forecast": [{"day": 1, "high": 18, "low": 11, "sky": "rain"}]}')]),
    "password": ("Reset the password of the user account alice@example.com and email her a reset link.",
                 "Alice forgot her login password; send her a link so she can set a new one.",
                 [("find_user", {"email": "alice@example.com"}, '{"user_id": 77}'),
                  ("send_password_reset", {"user_id": 77}, '{"sent": true}')]),
    "meeting": ("Schedule a team meeting in the calendar for Friday at 10am with Bob and Carol.",
                "Put a calendar event on Friday morning at ten for me, Bob and Carol to meet.",
                [("create_event", {"title": "Team meeting", "day": "Friday", "time": "10:00",
                                   "attendees": ["Bob", "Carol"]}, '{"event_id": "ev-3"}')]),
    "transfer": ("Transfer 200 dollars from my checking account to my savings account.",
                 "Move $200 out of checking and into savings.",
                 [("get_accounts", {}, '{"checking": 1500, "savings": 300}'),
                  ("transfer", {"from": "checking", "to": "savings", "amount": 200}, '{"ok": true}')]),
}


def make_episode(env_id: str, task_id: str, prompt: str, calls, *, reward: float = 1.0, split: str = "train",
                 final: str = "<think>all done</think>Done.", seed: int = 0) -> Episode:
    steps = [Step(index=i, text=f'<tool_call>{{"name": "{n}"}}</tool_call>',
                  calls=[CallRecord(n, a, executed=True, result=r)], observation=f"<tool_response>\n{r}\n</tool_response>")
             for i, (n, a, r) in enumerate(calls)]
    steps.append(Step(index=len(steps), text=final, terminated=True, reward=reward))
    return Episode(env_id=env_id, task_id=task_id, split=split, seed=seed, reward=reward, terminated=True,
                   messages=[{"role": "system", "content": "tools"}, {"role": "user", "content": prompt}],
                   steps=steps)


def task_episodes(env_id: str = "lopd/shop-v0", split: str = "train", reward: float = 1.0) -> list[Episode]:
    return [make_episode(env_id, name, prompt, calls, split=split, reward=reward)
            for name, (prompt, _, calls) in TASKS.items()]


