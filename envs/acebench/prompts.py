"""Prompt text for the ACEBench environments (our wording of ACEBench's instructions).

The official prompts live in ACEBench's GitHub repository, which is not installable; these
paraphrase them: same output format, same special-case sentences (the special checker looks
for the English phrases in both languages), same domain rules for the agent scenarios. Verdicts
do not depend on the prompt; model behaviour may differ slightly from runs with the originals.
"""

from __future__ import annotations

import json
from typing import Any

CALL_FORMAT = "[ApiName(key1='value1', key2='value2', ...)]"
INCORRECT_VALUE = '["There is incorrect value (value) for the parameters (key) in the conversation history."]'
MISSING_PARAMS = '["Missing necessary parameters (key1, key2, ...) for the api (ApiName)"]'
IRRELEVANT = '["Due to the limitations of the function, I cannot solve this problem."]'
FINISH = "finish conversation"

_NORMAL = {
    "en": (
        "You are an assistant that answers by calling APIs. From the API specifications and the conversation "
        f'so far, write the API calls the assistant should make next as {CALL_FORMAT}: start with "[", end '
        'with "]", separate several calls with commas and write nothing else. Include a parameter only when '
        "it is required or the user mentioned it; use the user's own words for values unless the "
        "specification asks for a format. Call an API without parameters as [ApiName()] and never invent "
        "parameter names."
    ),
    "zh": (
        "你是通过调用API来回答的助手。请根据API说明和目前为止的对话，写出助手下一步要进行的API调用，格式为"
        f'{CALL_FORMAT}：以"["开头、以"]"结尾，多个调用用英文逗号隔开，不要输出任何其他内容。只有必填参数或用户'
        "提到的参数才需要写出；除非说明要求特定格式，参数取值使用用户原文。没有参数的API写成[ApiName()]，不要编造参数名。"
    ),
}
_PROFILE = {
    "en": " Values the user did not state may come from the user profile below.",
    "zh": " 用户没有说明的取值可以来自下面的用户画像。",
}
_SPECIAL = {
    "en": (
        "You are an assistant that answers by calling APIs. If the user's request is clear and the APIs can "
        f"serve it, output every needed call as {CALL_FORMAT} and nothing else. Otherwise say what is wrong, "
        "checking in this order:\n"
        f"1. A value given by the user does not fit the API's definition: answer {INCORRECT_VALUE}\n"
        f"2. Details the API requires are missing: answer {MISSING_PARAMS}\n"
        f"3. No API can do what the user asks: answer {IRRELEVANT}"
    ),
    "zh": (
        "你是通过调用API来回答的助手。如果用户的请求清楚且API能够完成，请按"
        + CALL_FORMAT
        + "输出所有需要的调用，"
        "不要输出其他内容。否则请按以下顺序指出问题（句子保持英文原样）：\n"
        f"1. 用户给出的取值不符合API定义：回答 {INCORRECT_VALUE}\n"
        f"2. 缺少API必需的信息：回答 {MISSING_PARAMS}\n"
        f"3. 没有API能完成用户的请求：回答 {IRRELEVANT}"
    ),
}
_SPECIAL_FC = {
    "en": (
        "If the user's request is clear and the tools can serve it, call every needed tool. Otherwise reply "
        "in text, checking in this order:\n"
        f"1. A value given by the user does not fit the tool's definition: reply {INCORRECT_VALUE}\n"
        f"2. Details the tool requires are missing: reply {MISSING_PARAMS}\n"
        f"3. No tool can do what the user asks: reply {IRRELEVANT}"
    ),
    "zh": (
        "如果用户的请求清楚且工具能够完成，请调用所有需要的工具。"
        "否则请用文字回复，按以下顺序检查（句子保持英文原样）：\n"
        f"1. 用户给出的取值不符合工具定义：回复 {INCORRECT_VALUE}\n"
        f"2. 缺少工具必需的信息：回复 {MISSING_PARAMS}\n"
        f"3. 没有工具能完成用户的请求：回复 {IRRELEVANT}"
    ),
}
_FC_NORMAL = {
    "en": "Call the tools the user's request needs, with only the arguments the user gave or the tool "
    "requires.",
    "zh": "请调用完成用户请求所需的工具，只填写用户给出或工具必需的参数。",
}
_HISTORY = {"en": "Conversation history 1..t:\n{question}", "zh": "对话历史1..t:\n{question}"}


def functions_text(functions: list[dict[str, Any]]) -> str:
    return json.dumps(functions, ensure_ascii=False)


def single_turn_system(
    family: str,
    language: str,
    functions: list[dict[str, Any]],
    time: str = "",
    profile: str | None = None,
    fc: bool = False,
) -> str:
    """System text for a normal or special entry (prompt format lists the APIs; FC gets them as tools)."""
    if family == "special":
        head = (_SPECIAL_FC if fc else _SPECIAL)[language]
    elif fc:
        head = _FC_NORMAL[language]
    else:
        head = _NORMAL[language]
    parts = [head + (_PROFILE[language] if profile else "")]
    if time:
        parts.append(time)
    if profile:
        parts.append(("User profile:\n" if language == "en" else "用户画像：\n") + str(profile))
    if not fc:
        parts.append(
            ("API specifications:\n" if language == "en" else "API说明：\n") + functions_text(functions)
        )
    return "\n\n".join(parts)


def single_turn_user(question: str, language: str) -> str:
    return _HISTORY[language].format(question=question)


# ---- agent scenarios ------------------------------------------------------------------------

_AGENT_STEP = {
    "en": (
        "You are an agent that completes the user's task by calling APIs; an execution role runs each call "
        f"and returns its result. To call APIs answer only with {CALL_FORMAT} (several calls separated by "
        "commas). Work step by step, one call at a time, deciding each step from the results so far. "
        "Include only required parameters and those the task mentions; use the task's wording for values. "
        f'When the task is done, answer "{FINISH}".'
    ),
    "zh": (
        "你是通过调用API完成用户任务的agent；execution角色会执行每个调用并返回结果。需要调用API时只输出"
        f"{CALL_FORMAT}（多个调用用英文逗号隔开）。请一步一步执行，每次调用一个API，根据已有结果决定下一步。"
        f'只填写必填参数和任务中提到的参数，取值使用任务原文。任务完成后回复"{FINISH}"。'
    ),
}
_AGENT_TURN = {
    "en": (
        "You are an agent talking with a user and calling APIs; an execution role runs each call and returns "
        f"its result. To call APIs answer only with {CALL_FORMAT} and nothing else. If information is "
        "missing, "
        "ask the user instead of guessing; never answer on the user's behalf. Include only required "
        "parameters and those the user mentioned; use the user's wording for values."
    ),
    "zh": (
        "你是与用户对话并调用API的agent；execution角色会执行每个调用并返回结果。需要调用API时只输出"
        f"{CALL_FORMAT}，不要输出其他内容。信息不完整时请向用户询问，不要猜测，也不要替用户回答。只填写必填参数和"
        "用户提到的参数，取值使用用户原文。"
    ),
}
_PHONE_RULES = {
    "en": (
        "It is 2024-06-11 16:00. You act as a phone assistant that sends messages, keeps reminders and "
        "orders "
        "food delivery. Log in with login_device() before viewing messages; know sender and receiver before "
        "sending or viewing messages. If the inbox is full, ask the user which message to delete. A reminder "
        "needs a title and a description; its time defaults to now. Before ordering, log in to the food "
        "platform with the user's account and password; order from one merchant at a time; if the balance is "
        "too low, tell the user. Names the user gives are full user names. Call one tool at a time (the same "
        f'tool may be called in parallel) and do not repeat calls. When the task is done, answer "{FINISH}".'
    ),
    "zh": (
        "现在是2024-06-11 16:00。你是手机助手，可以发短信、管理提醒和点外卖。查看短信前先用login_device()登"
        "录设备；"
        "发送或查看短信前要知道发送者和接收者。短信容量已满时，询问用户删除哪一条。提醒需要标题和描述，时间默认为当前时间。"
        "点外卖前先用用户的账号和密码登录外卖平台；不同商家的外卖要逐个下单；余额不足时告知用户。用户提到的名字即完整用户名。"
        f'每次只调用一个工具（同一工具可以并行调用），不要重复调用。任务完成后回复"{FINISH}"。'
    ),
}
_TRAVEL_RULES = {
    "en": (
        "It is 2024-07-15 08:00. You act as an airline agent who books, modifies and cancels flights. Before "
        'any change to a reservation, list the details and get an explicit "yes" from the user. Get the '
        "user ID and password first. Search flights before booking; a round trip is two bookings; if no "
        "direct flight fits, look for connecting flights and book both legs. Payment is cash or bank; ask "
        "which. Free checked bags: regular members 1 (economy) / 2 (business), silver 2 / 3, gold 3 / 3; "
        "each "
        "extra bag costs 50 yuan. Changes keep origin and destination; bags can be added, not removed. "
        "Cancelling needs the user ID, reservation ID and reason. Call one tool at a time (the same tool may "
        f'be called in parallel). When the task is done, answer "{FINISH}".'
    ),
    "zh": (
        "现在是2024-07-15 08:00。你是航空公司客服，可以预订、修改和取消航班。修改预订前要列出细节并得到用户"
        "明确的"
        '"是"。先获取用户ID和密码。预订前先查询航班；往返是两次预订；没有合适的直达航班时查找中转航班并预订两段。'
        "支付方式为cash或bank，需询问用户。免费托运行李：regular会员经济舱1件、商务舱2件，silver 2/3件，"
        "gold 3/3件；"
        "每件额外行李50元。改签不能改变出发地和目的地；行李只能增加不能减少。取消需要用户ID、预订ID和原因。"
        f'每次只调用一个工具（同一工具可以并行调用）。任务完成后回复"{FINISH}"。'
    ),
}


def agent_system(
    mode: str, language: str, involved_classes: list[str], functions: list[dict[str, Any]], fc: bool = False
) -> str:
    """System text for an agent entry (multi_step or multi_turn)."""
    parts = [(_AGENT_STEP if mode == "multi_step" else _AGENT_TURN)[language]]
    if mode == "multi_turn":
        if "Travel" in involved_classes:
            parts.append(_TRAVEL_RULES[language])
        if "BaseApi" in involved_classes:
            parts.append(_PHONE_RULES[language])
    if not fc:
        parts.append(
            ("APIs you can call:\n" if language == "en" else "你可以调用的API：\n")
            + functions_text(functions)
        )
    return "\n\n".join(parts)


# ---- the simulated user ---------------------------------------------------------------------

USER_OPENING = {"en": "Is there anything you need help with today?", "zh": "今天有什么需要帮助的吗？"}
_USER_RULES = {
    "en": (
        "You are a user talking with an agent.\n\nInstruction: {instruction}\n\nRules:\n"
        "- Write one line per message, as the user.\n"
        "- Reveal the instruction step by step: give only what the current step needs, but give all of it.\n"
        "- Never invent facts the instruction does not give; say you do not know instead.\n"
        "- Confirm or refuse according to the instruction; do not offer help to the agent.\n"
        "- Use your own words rather than repeating the instruction.\n"
        "- When asked whether you need more help, check that every task is done; if not, ask for the next "
        "one.\n"
        f"- When everything in the instruction is done, reply with the single line '{FINISH}'."
    ),
    "zh": (
        "你是与agent互动的用户。\n\nInstruction: {instruction}\n\n规则：\n"
        "- 每次只写一行，作为用户发言。\n"
        "- 逐步透露Instruction：只提供当前步骤需要的信息，但要提供完整。\n"
        "- 不要编造Instruction中没有的信息，不知道就直接说不知道。\n"
        "- 按Instruction决定是否确认；不要主动帮助agent。\n"
        "- 用自己的话表达，不要照抄Instruction。\n"
        "- 被问到是否还需要帮助时，确认所有任务是否完成，没有完成就提出下一个任务。\n"
        f"- Instruction中的任务全部完成后，单独回复一行'{FINISH}'。"
    ),
}
_ROUND_TRIP = {
    "en": "\n- If the instruction asks for a round trip, say at the very start that you want to book a "
    "round trip.",
    "zh": '\n- 如果Instruction要求预订往返航班，一开始就说明要"预定往返航班"。',
}


def user_system(instruction: str, language: str, involved_classes: list[str]) -> str:
    text = _USER_RULES[language].format(instruction=instruction)
    if "Travel" in involved_classes and "BaseApi" not in involved_classes:
        text += _ROUND_TRIP[language]
    return text
