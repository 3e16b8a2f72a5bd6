import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from lcb_records import SUM_ROW, TWO_SUM_ROW


@pytest.fixture
def own_file(tmp_path):
    path = tmp_path / "own.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (SUM_ROW, TWO_SUM_ROW)))
    return path
