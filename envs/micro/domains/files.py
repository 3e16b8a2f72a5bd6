"""Files: folders and files. A file is found by listing its folder; names repeat across folders."""

from __future__ import annotations

import random
from typing import Any

from envs.micro.domains.base import Domain, TaskSpec, Vocab, first_data, operation_types
from envs.micro.domains.tasks import cell, check, first_template, new_ids, table, task


class FileSystem:
    """A shared drive with folders, files and sharing."""

    def __init__(self, init_config: dict):
        self.folders: dict = {}
        self.files: dict = {}
        self.next_file_no: int = 1
        self.init_config = init_config

    def find_folder(self, folder: str) -> dict:
        """Find a folder by name.

        Args:
            folder: The folder name.
        """
        found = [dict(f) for f in self.folders.values() if f["name"] == folder]
        if not found:
            return {"success": False, "error": f"no folder named {folder}"}
        return {"success": True, "data": found}

    def list_folder(self, folder_id: str) -> dict:
        """The files in a folder.

        Args:
            folder_id: The folder's id.
        """
        if folder_id not in self.folders:
            return {"success": False, "error": f"unknown folder {folder_id}"}
        rows = [
            {"file_id": f["file_id"], "name": f["name"]}
            for f in self.files.values()
            if f["folder_id"] == folder_id
        ]
        return {"success": True, "data": rows}

    def move_file(self, file_id: str, folder_id: str) -> dict:
        """Move a file into another folder.

        Args:
            file_id: The file's id.
            folder_id: The target folder's id.
        """
        if file_id not in self.files or folder_id not in self.folders:
            return {"success": False, "error": "unknown file or folder"}
        self.files[file_id]["folder_id"] = folder_id
        return {"success": True, "data": {"file_id": file_id, "folder_id": folder_id}}

    def share_file(self, file_id: str, email: str) -> dict:
        """Give a person access to a file.

        Args:
            file_id: The file's id.
            email: The person's email address.
        """
        f = self.files.get(file_id)
        if f is None:
            return {"success": False, "error": f"unknown file {file_id}"}
        if "@" not in email:
            return {"success": False, "error": "invalid email"}
        if email not in f["shared_with"]:
            f["shared_with"].append(email)
        return {"success": True, "data": {"file_id": file_id, "shared_with": list(f["shared_with"])}}

    def compress_file(self, file_id: str) -> dict:
        """Make a zip archive of a file next to it.

        Args:
            file_id: The file's id.
        """
        f = self.files.get(file_id)
        if f is None:
            return {"success": False, "error": f"unknown file {file_id}"}
        nid = f"F{self.next_file_no}"
        self.next_file_no += 1
        self.files[nid] = {
            "file_id": nid,
            "name": f["name"] + ".zip",
            "folder_id": f["folder_id"],
            "shared_with": [],
        }
        return {"success": True, "data": {"file_id": nid}}

    def get_disk_usage(self) -> dict:
        """How many files the drive holds."""
        return {"success": True, "data": {"files": len(self.files), "folders": len(self.folders)}}


FOLDERS = (
    "reports",
    "invoices",
    "drafts",
    "photos",
    "archive",
    "contracts",
    "slides",
    "research",
    "taxes",
    "designs",
    "minutes",
    "scans",
    "budgets",
    "legal",
    "media",
    "recipes",
    "journeys",
    "music",
)
FILES = (
    "plan.docx",
    "q3.xlsx",
    "logo.png",
    "notes.txt",
    "deck.pptx",
    "memo.pdf",
    "map.pdf",
    "budget.csv",
    "photo.jpg",
    "draft.md",
    "intro.mp4",
    "list.txt",
    "terms.pdf",
    "chart.png",
    "index.html",
    "song.mp3",
    "data.json",
    "report.pdf",
    "scan.tiff",
    "agenda.docx",
    "faq.md",
    "poster.png",
    "form.pdf",
    "log.txt",
    "brief.docx",
    "table.csv",
    "sketch.svg",
    "quote.pdf",
    "menu.pdf",
    "cv.pdf",
)
DOMAINS = ("example.com", "mail.org", "corp.net")


def make_task(rng: random.Random, v: Vocab) -> TaskSpec:
    fnames = v.sample("folder", rng, 3)
    names = v.sample("file", rng, 4)
    fids, ids = new_ids(rng, "D", 3), new_ids(rng, "F", 6)
    cfg = {
        "folders": table("folder_id", fids, name=fnames),
        "files": _files(ids, names, fids),
        "next_file_no": rng.randint(100, 900),
    }
    person = v.people(rng, 1)[0]
    email = f"{person.split()[0].lower()}.{person.split()[1].lower()}@{rng.choice(DOMAINS)}"
    if first_template(rng):
        return _move_share_task(rng, cfg, names[0], fnames, email)
    return _share_task(rng, cfg, names[0], fnames, email)


def _files(ids: list[str], names: list[str], fids: list[str]) -> dict[str, dict[str, Any]]:
    """The drive's files: the target (the first file, ``names[0]`` in the source folder) has a twin of the
    same name (the fourth) in the destination, so only the listing of the source folder tells them apart."""
    src, dst, third = fids
    layout = [
        (names[0], src),
        (names[1], src),
        (names[2], src),
        (names[0], dst),
        (names[3], dst),
        (names[1], third),
    ]
    return {
        i: {"file_id": i, "name": n, "folder_id": f, "shared_with": []}
        for i, (n, f) in zip(ids, layout, strict=True)
    }


def _shared_with(email: str, file_id: str) -> str:
    """Source of: the file is shared with ``email``."""
    return f"{email!r} in {cell('files', file_id, 'shared_with')}"


def _move_share_task(
    rng: random.Random, cfg: dict[str, Any], target: str, fnames: list[str], email: str
) -> TaskSpec:
    """The source folder's copy moves to the destination folder and is shared."""
    tid, dst = next(iter(cfg["files"])), list(cfg["folders"])[1]  # the source copy, the destination
    shared = _shared_with(email, tid)
    checks = [
        check(
            f"{target} from '{fnames[0]}' is now in '{fnames[1]}'",
            f"return {cell('files', tid, 'folder_id')} == {dst!r}",
        ),
        check(f"It is shared with {email}", f"return {shared}"),
    ]
    texts = (
        "Move '{file}' from the '{source}' folder to '{dest}' and share it with {email}.",
        "Put the '{source}' copy of '{file}' into '{dest}', then give {email} access to it.",
    )
    params = {"file": target, "source": fnames[0], "dest": fnames[1], "email": email}
    return task(rng, "move_share", texts, cfg, checks, params)


def _share_task(
    rng: random.Random, cfg: dict[str, Any], target: str, fnames: list[str], email: str
) -> TaskSpec:
    """The source folder's copy is shared; its twin in the other folder is not."""
    file_ids = list(cfg["files"])
    tid, twin = file_ids[0], file_ids[3]  # the source copy and its namesake in the destination
    shared = _shared_with(email, tid)
    checks = [
        check(f"{target} in '{fnames[0]}' is shared with {email}", f"return {shared}"),
        check("Only that copy is shared", f"return {shared} and {cell('files', twin, 'shared_with')} == []"),
    ]
    texts = (
        "Share '{file}' in the '{source}' folder with {email}.",
        "Give {email} access to the file '{file}' that sits in '{source}'.",
    )
    params = {"file": target, "source": fnames[0], "other": fnames[1], "email": email}
    return task(rng, "share", texts, cfg, checks, params)


def solve(p: dict[str, Any], mistake: str | None = None):
    folder = p["other"] if mistake == "wrong_folder" else p["source"]
    r = yield "find_folder", {"folder": folder}
    r = yield "list_folder", {"folder_id": first_data(r)["folder_id"]}
    fid = next(f["file_id"] for f in r["data"] if f["name"] == p["file"])
    if "dest" in p and mistake != "share_only":
        r = yield "find_folder", {"folder": p["dest"]}
        if mistake == "compress_instead":
            yield "compress_file", {"file_id": fid}
        else:
            yield "move_file", {"file_id": fid, "folder_id": first_data(r)["folder_id"]}
    if mistake == "skip_share":
        return
    yield "share_file", {"file_id": fid, "email": p["email"]}


DOMAIN = Domain(
    name="files",
    env_class=FileSystem,
    make_task=make_task,
    solve=solve,
    summary="A shared drive with folders, files and sharing.",
    introduction="This environment is a shared drive. It keeps folders and the files in them, and who each "
    "file is shared with.",
    rules=(
        "File names are unique within a folder, not across folders.",
        "Sharing needs a valid email address.",
    ),
    vocab={"folder": FOLDERS, "file": FILES},
    mistakes={"move_share": ("skip_share", "share_only", "compress_instead"), "share": ("wrong_folder",)},
    distractors=("compress_file", "get_disk_usage"),
    expert_success=0.1,
    operations=operation_types(FileSystem, "move_file", "share_file", "compress_file"),
)
