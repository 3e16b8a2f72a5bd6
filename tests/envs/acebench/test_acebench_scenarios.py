"""Our scenario classes and the execution role, unit by unit (behaviour upstream shows)."""

import pytest

from envs.acebench.executor import (
    DECODE_FAILURE_REPLY,
    MULTI_TURN_ERROR_TEXT,
    AgentRuntime,
    decode_execution_message,
    is_execution_request,
)
from envs.acebench.scenarios import SAVED_ATTRIBUTES, make_instance, public_methods

PHONE = ["BaseApi", "MessageApi", "ReminderApi", "FoodPlatform"]


def runtime(wifi=True, logged_in=True, classes=PHONE, mode="multi_step", language="en"):
    return AgentRuntime(language, {"BaseApi": {"wifi": wifi, "logged_in": logged_in}}, classes, mode)


def state(rt, cls):
    return next(d[cls] for d in rt.snapshot() if cls in d)


def test_calls_reach_every_instance_that_has_the_method():
    rt = runtime(wifi=False, logged_in=False)
    rt.respond("[turn_on_wifi()]")
    rt.respond("[login_device()]")
    assert all(rt.instances[c].wifi and rt.instances[c].logged_in for c in PHONE)


def test_inbox_capacity_ids_and_missing_time():
    rt = runtime(classes=["BaseApi", "MessageApi"])
    full = rt.respond("[send_message(sender_name='Eve', receiver_name='Frank', message='hi')]").results[0]
    assert full["status"] is False and "full" in full["message"]
    rt.respond("[delete_message(message_id=2)]")
    assert rt.respond("[send_message(sender_name='Eve', receiver_name='Frank', message='hi')]").results[0][
        "status"
    ]
    inbox = state(rt, "MessageApi")["inbox"]
    assert sorted(inbox, key=int) == ["1", "3", "4", "5", "6", "7"]
    assert inbox["7"] == {"sender_id": "USR100", "receiver_id": "USR101", "message": "hi"}  # no time field
    # so finding the latest message now fails on the new one, as upstream does
    assert rt.respond("[get_latest_message_id()]").results == ["Error during execution: 'time'"]
    assert rt.respond("[delete_message(message_id='7')]").results[0]["status"] is False  # ids are ints


def test_latest_and_earliest_by_date():
    rt = runtime(classes=["MessageApi"])
    assert rt.respond("[get_latest_message_id()]").results[0]["message_id"] == 4
    assert rt.respond("[get_earliest_message_id()]").results[0]["message_id"] == 3


def test_checks_run_in_upstream_order():
    rt = runtime(wifi=False, logged_in=False, classes=["MessageApi"])
    msg = "[send_message(sender_name='Eve', receiver_name='Nobody', message='x')]"
    assert "not logged in" in rt.respond(msg).results[0]["message"]
    rt.respond("[login_device()]")
    assert "Wi-Fi" in rt.respond(msg).results[0]["message"]


def test_reminders():
    rt = runtime(classes=["BaseApi", "ReminderApi"])
    rt.respond("[add_reminder(title='A', description='B', time='2024-06-11 16:00')]")
    rem = state(rt, "ReminderApi")["reminder_list"]
    assert rem["4"] == {
        "reminder_id": 4,
        "title": "A",
        "description": "B",
        "time": "2024-06-11 16:00",
        "notified": False,
    }
    assert (
        rt.respond("[view_reminder_by_title(title='To-do list')]").results[0]["reminder"]["reminder_id"]
        == 1003
    )
    rt.respond("[add_reminder(title='C', description='D', time='t')]")
    rt.respond("[add_reminder(title='E', description='F', time='t')]")
    assert rt.respond("[add_reminder(title='G', description='H', time='t')]").results[0]["status"] is False
    # upstream formats matched times with strftime although they are strings
    assert rt.respond("[search_reminders(keyword='Team')]").results[0].startswith("Error during execution")
    assert rt.respond("[search_reminders(keyword='zzz')]").results[0]["status"] is False


@pytest.mark.parametrize(
    "language, merchant, product, ok_at_balance",
    [("en", "Hema Fresh", "Fresh Gift Pack", True), ("zh", "盒马生鲜", "生鲜大礼包", False)],
)
def test_food_orders(language, merchant, product, ok_at_balance):
    rt = runtime(wifi=False, classes=["BaseApi", "FoodPlatform"], language=language)
    assert (
        rt.respond("[login_food_platform(username='Jack', password='password654')]").results[0]["status"]
        is False
    )
    rt.respond("[turn_on_wifi()]")
    assert rt.respond("[login_food_platform(username='Jack', password='password654')]").results[0]["status"]
    assert (
        rt.respond("[login_food_platform(username='Jack', password='password654')]").results[0]["status"]
        is False
    )
    order = (
        f"[add_food_delivery_order(username='Jack', merchant_name='{merchant}', items=[{{'product': "
        f"'{product}', "
        "'quantity': 2}])]"
    )
    assert rt.respond(order).results[0]["status"] is False  # 198 > 120
    rt.instances["FoodPlatform"].users["Jack"]["balance"] = 198.0
    assert rt.respond(order).results[0]["status"] is ok_at_balance  # en refuses >, zh refuses >=
    bad_qty = order.replace("'quantity': 2", "'quantity': 0")
    assert rt.respond(bad_qty).results[0]["status"] is False
    fp = state(rt, "FoodPlatform")
    assert fp["logged_in_users"] == ["Jack"]
    assert len(fp["orders"]) == (1 if ok_at_balance else 0)


def test_travel_booking_modifying_cancelling():
    rt = runtime(classes=["Travel"], mode="multi_turn")
    r = rt.respond(
        "[reserve_flight(user_id='user3', password='password789', flight_no='MU3561', "
        "cabin='Economy Class', payment_method='bank', baggage_count=4)]"
    ).results[0]
    assert "res_5" in r and "1550" in r  # 1500 + one extra bag (gold: 3 free)
    t = state(rt, "Travel")
    assert t["users"]["user3"]["bank_balance"] == 3450.0
    assert t["reservations"][-1] == {
        "reservation_id": "res_5",
        "user_id": "user3",
        "flight_no": "MU3561",
        "payment_method": "bank",
        "cabin": "Economy Class",
        "baggage": 4,
    }
    rt.respond(
        "[modify_flight(user_id='user1', reservation_id='res_2', new_flight_no='CZ4352', "
        "new_cabin='Economy Class')]"
    )
    t = state(rt, "Travel")
    assert t["users"]["user1"]["bank_balance"] == 51100.0  # refund from the *current* flight's prices
    rt.respond("[cancel_reservation(user_id='user1', reservation_id='res_1', reason='change of plans')]")
    t = state(rt, "Travel")
    assert t["users"]["user1"]["cash_balance"] == 3200.0 and len(t["reservations"]) == 5  # stays listed
    # a wrong password still returns a truthy dict upstream, so booking raises on it
    rt2 = runtime(classes=["Travel"], mode="multi_turn")
    out = rt2.respond(
        "[reserve_flight(user_id='user1', password='bad', flight_no='CA1234', cabin='Economy Class', "
        "payment_method='bank', baggage_count=1)]"
    )
    assert out.results == list(MULTI_TURN_ERROR_TEXT) and not out.recorded


def test_execution_decoding_quirks():
    assert [c.name for c in decode_execution_message(" turn_on_wifi()", "multi_step")] == ["turn_on_wifi"]
    assert [c.name for c in decode_execution_message("[a(), b()]", "multi_step")] == ["a", "b"]
    assert decode_execution_message("['hello']", "multi_step") == []  # a name: no calls, no error
    for bad in ("", "[a(), 1]", "[f(x=1)] trailing", "[f(x=]"):
        with pytest.raises(ValueError):
            decode_execution_message(bad, "multi_step")
    call = decode_execution_message("[f(x=g())]", "multi_turn")[0]
    assert call.kwargs == {"x": "g()"}  # a keyword-less nested call is its source text
    # a nested call with keywords is rendered back as a call, which upstream's eval cannot resolve
    assert decode_execution_message("[f(x=g(y=1))]", "multi_turn")[0].unrunnable == "name 'g' is not defined"
    with pytest.raises(ValueError):  # a plain dict argument is re-rendered as a call and breaks decoding
        decode_execution_message("[f(x={'a': 1})]", "multi_turn")
    assert decode_execution_message("[f(x=float('inf'))]", "multi_step")[0].kwargs == {"x": "float('inf')"}
    assert is_execution_request("Sure: [turn_on_wifi()]") is False  # [..] found but it does not decode
    assert is_execution_request("[turn_on_wifi()]") and not is_execution_request("Which message?")


def test_errors_and_unknown_functions_by_mode():
    step = runtime(classes=["MessageApi"])
    out = step.respond("[delete_message(message_id=1), no_such_api(x=1), delete_message(mid=2)]")
    assert out.results[0]["status"] is True
    assert out.results[1] == out.results[0]  # upstream re-appends the previous result for an unknown name
    assert out.results[2].startswith("Error during execution: ") and "unexpected keyword" in out.results[2]
    assert (
        step.respond("[no_such_api()]").results[0].startswith("Error during execution: cannot access local")
    )
    assert step.respond("not a call").results == DECODE_FAILURE_REPLY
    assert (
        step.respond("[send_message('Eve', 'Frank', 'hi')]").results[0].startswith("Error during execution")
    )
    turn = runtime(classes=["MessageApi"], mode="multi_turn")
    out = turn.respond("[delete_message(message_id=1), delete_message(mid=2), delete_message(message_id=3)]")
    assert out.results == list(MULTI_TURN_ERROR_TEXT)  # the literal, un-formatted upstream text
    assert not out.recorded and turn.snapshot() == []  # nothing saved until an execution succeeds
    inbox = turn.instances["MessageApi"].inbox
    assert 1 not in inbox and 3 in inbox  # the first call ran, the third never did
    turn.respond("[get_latest_message_id()]")
    assert sorted(state(turn, "MessageApi")["inbox"], key=int) == ["2", "3", "4", "5", "6"]


def test_results_are_rendered_through_json():
    rt = runtime(classes=["MessageApi"])
    times = rt.respond("[get_all_message_times_with_ids()]").results[0]
    assert times["1"] == "2024-06-09"  # int keys became strings
    food = runtime(classes=["FoodPlatform"])
    assert food.respond("[check_balance(user_name='Eve')]").results == [500.0]  # str() then json.loads
    menu = food.respond("[get_products(merchant_name='Heytea')]").results[0]
    assert menu.startswith("[{'product': 'Cheese Milk Tea'")  # a list is shown as its str()


def test_class_surface():
    for name, attrs in SAVED_ATTRIBUTES.items():
        for language in ("en", "zh"):
            inst = make_instance(name, language)
            assert all(hasattr(inst, a) for a in attrs)
    assert "turn_on_wifi" in public_methods(make_instance("FoodPlatform", "en"))
    assert "turn_on_wifi" not in public_methods(make_instance("Travel", "en"))
    with pytest.raises(KeyError):
        make_instance("Finance", "en")
    with pytest.raises(ValueError):
        AgentRuntime("en", {}, ["Nope"], "multi_step")
