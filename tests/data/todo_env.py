"""A user's own env, outside the repo's envs/: the tests of external envs write it into a package."""
from envs import Task, ToolEnv, checklist_reward, tool


class Todo:
    def __init__(self):
        self.items = []

    @tool
    def add_todo(self, text: str) -> int:
        """Add an item to the list; returns how many there are."""
        self.items.append(text)
        return len(self.items)


class TodoEnv(ToolEnv):
    def load_tasks(self):
        return [Task("milk", "Add milk to the list.", data={"want": ["milk"]}),
                Task("eggs", "Add eggs to the list.", split="eval", data={"want": ["eggs"]})]

    def setup(self, task):
        return Todo()

    def verify(self, task, todo):
        return checklist_reward([todo.items == task.data["want"]])
