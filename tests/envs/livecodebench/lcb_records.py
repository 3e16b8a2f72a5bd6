"""Records of our own in the official code_generation_lite row format (for the LiveCodeBench tests)."""

import base64
import json
import pickle
import zlib


def encode_private(tests: list[dict]) -> str:
    """base64(zlib(pickle(json))) as in the HF files."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode()


def row(
    qid,
    content,
    tests_public,
    tests_private,
    *,
    date="2024-01-15T00:00:00",
    starter="",
    func_name=None,
    platform="atcoder",
    encode=True,
):
    return {
        "question_title": f"title {qid}",
        "question_content": content,
        "platform": platform,
        "question_id": qid,
        "contest_id": "own",
        "contest_date": date,
        "starter_code": starter,
        "difficulty": "easy",
        "public_test_cases": json.dumps(tests_public),
        "private_test_cases": encode_private(tests_private) if encode else json.dumps(tests_private),
        "metadata": json.dumps({"func_name": func_name} if func_name else {}),
    }


def stdin_test(i, o):
    return {"input": i, "output": o, "testtype": "stdin"}


def fn_test(i, o):
    return {"input": i, "output": o, "testtype": "functional"}


SUM_ROW = row(
    "own_sum",
    "Read N then N integers; print their sum and their mean.",
    [stdin_test("3\n1 2 3\n", "6\n2.0\n")],
    [stdin_test("2\n5 6\n", "11\n5.50\n"), stdin_test("1\n-4\n", "-4\n-4\n")],
)
TWO_SUM_ROW = row(
    "own_twosum",
    "Return indices of two numbers adding up to target.",
    [fn_test("[2, 7, 11, 15]\n9", "[0, 1]")],
    [fn_test("[3, 2, 4]\n6", "[1, 2]"), fn_test("[3, 3]\n6", "[0, 1]")],
    starter="class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ",
    func_name="twoSum",
    platform="leetcode",
    date="2024-06-01T00:00:00",
)
SUM_OK = "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs))\nprint(sum(xs) / n)\n"
TWO_SUM_OK = (
    "class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
    "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i\n"
)
