"""Labelled texts for the loop watch: what a degenerate generation looks like, and the
legitimate periodic output that must never be called a loop.

Each case is a generator function (deterministic, seeded) and a label. ``looping`` cases must
end ``looping`` with a confirmed cycle; the others must never reach ``looping`` at any point
while they stream. Used by tests/runner/test_loopwatch.py and bench/loops.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

_VOCABULARY = (
    "the a an of to in for on with by from at as into over under between after before "
    "model answer result value number function test file table list line step check "
    "problem solution reason proof case example method system data input output error "
    "first second third next last other same different simple careful exact small large "
    "we it they this that which because so then when while if although since therefore "
    "compute compare verify return write read find add multiply divide count consider "
    "note assume define prove show give take make keep need want try think know see "
    "quickly slowly clearly roughly probably certainly again also only just still even "
    "river mountain city garden window paper engine signal market ocean forest bridge "
    "orange silver quiet bright heavy narrow ancient modern gentle sudden hollow "
    "teacher student doctor farmer driver painter writer player builder sailor "
    "carries measures follows explains reaches changes covers holds shapes turns"
)
_WORDS = _VOCABULARY.split()

_NAME_LIST = (
    "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy "
    "rupert sybil trent victor walter xavier yolanda zoe"
)
_NAMES = _NAME_LIST.split()


def prose(chars: int, seed: int = 1) -> str:
    """Varied sentences in paragraphs: nothing repeats for long."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 18)))
        if rng.random() < 0.3:
            sentence += f" {rng.randint(2, 9999)}"
        piece = sentence[0].upper() + sentence[1:] + rng.choice([". ", ". ", "? ", ".\n\n"])
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


# --- must be "looping" -----------------------------------------------------------------


def sentence_repeated() -> str:
    sentence = "The answer is 42 because the two halves add up to the whole amount. "
    return prose(1500, seed=2) + sentence * 36


def paragraph_repeated() -> str:
    paragraph = prose(1500, seed=3).rstrip() + "\n\n"
    return prose(800, seed=4) + paragraph * 6


def counting_loop() -> str:
    steps = "".join(f"Step {k}: add 1 to get {k + 1}.\n" for k in range(1, 201))
    return "Let me count up carefully.\n" + steps


def thinking_wait_loop() -> str:
    return "So the sum is 17. " + "I need to check again. Wait, " * 100


def code_block_repeated() -> str:
    block = (
        "```python\n"
        "def total(items):\n"
        "    result = 0\n"
        "    for item in items:\n"
        "        result += item.price * item.quantity\n"
        "    return result\n"
        "```\n"
        "Let me double-check the function above once more.\n\n"
    )
    return "Here is the function:\n\n" + block * 16


def loop_after_20k() -> str:
    return prose(20_000, seed=5) + "Therefore the final answer must be checked again. " * 50


def long_period_loop() -> str:
    cycle = prose(3000, seed=6).rstrip() + "\n\n"
    return prose(500, seed=7) + cycle * 7


def zeros_forever() -> str:
    return "[" + "0, " * 3000


def newlines_forever() -> str:
    return prose(600, seed=8) + "\n" * 6000


def word_stutter() -> str:
    return "I think that " + "the " * 2000


def bullet_block_loop() -> str:
    block = "- Check the input.\n- Check the output.\n- Compare them.\n"
    return "Plan:\n" + block * 60


def dotted_loop() -> str:
    cycle = "Thinking" + "." * 40 + "\nLet me reconsider the whole problem from the start.\n"
    return cycle * 40


def rule_loop() -> str:
    # the period divides the batch, so every analysis lands inside the rule
    return "Output:\n" + ("=" * 255 + "\n") * 40


def square_search_loop() -> str:
    lines = "".join(
        f"Try n = {n}: n squared is {n * n}, which is not the target, so move on.\n"
        for n in range(3, 120)
    )
    return "We search for the smallest n.\n" + lines


def cjk_loop() -> str:
    return "我们来检查一下。" + "我需要再检查一遍这个结果。" * 400


# --- must never be "looping" -------------------------------------------------------------


def normal_prose() -> str:
    return prose(30_000, seed=9)


def separator_rules() -> str:
    rule = "=" * 80 + "\n"
    return "".join(rule + f"Section {k}\n" + rule + prose(700, seed=10 + k) for k in range(5))


def hundred_zeros() -> str:
    return "The initial state is:\n\n```python\nstate = [" + ", ".join(["0"] * 100) + "]\n```\n"


def long_zero_list() -> str:
    return "buffer = [" + ", ".join(["0"] * 700) + "]\n" + prose(1000, seed=33)


def markdown_table() -> str:
    rows = "".join(f"| row {k} | ok | 0.{k % 10}5 | yes |\n" for k in range(1, 41))
    head = "| name | status | score | passed |\n|------|--------|-------|--------|\n"
    return prose(600, seed=11) + "\n\n" + head + rows + "\n" + prose(600, seed=12)


def repeated_asserts() -> str:
    asserts = '    assert normalize(" a ") == "a"\n' * 30
    tail = (
        "\n\ndef test_other_cases():\n"
        '    assert normalize("") == ""\n'
        '    assert normalize("B") == "b"\n'
    )
    return "def test_normalize_is_stable():\n" + asserts + tail + prose(800, seed=13)


def csv_numbers() -> str:
    rng = random.Random(14)
    rows = "".join(
        f"{rng.randint(1, 9999)},{rng.uniform(0, 100):.2f},{rng.randint(0, 50)}\n"
        for _ in range(1500)
    )
    return "id,value,delta\n" + rows


def similar_functions() -> str:
    fields = [
        ("name", "str"),
        ("email", "str"),
        ("age", "int"),
        ("height", "float"),
        ("address", "str"),
        ("phone", "str"),
        ("created", "datetime"),
        ("updated", "datetime"),
        ("score", "float"),
        ("rank", "int"),
        ("owner", "User"),
        ("tags", "list[str]"),
    ]
    out = ["class Record:\n"]
    for name, kind in fields:
        out.append(
            f"    def get_{name}(self) -> {kind}:\n"
            f'        """Return the {name} of this record."""\n'
            f"        return self._{name}\n\n"
            f"    def set_{name}(self, value: {kind}) -> None:\n"
            f'        """Set the {name} of this record."""\n'
            f"        self._{name} = value\n\n"
        )
    return "".join(out)


def training_log() -> str:
    rng = random.Random(15)
    lines = "".join(
        f"epoch {k}: loss {rng.uniform(0.1, 2):.4f} acc {rng.uniform(0.5, 1):.3f}\n"
        for k in range(1, 61)
    )
    return prose(400, seed=16) + "\n" + lines + prose(400, seed=17)


def json_records() -> str:
    rng = random.Random(18)
    items = ",\n".join(
        f'  {{"id": {k}, "name": "{rng.choice(_NAMES)}", "score": {rng.random():.3f}}}'
        for k in range(150)
    )
    return "[\n" + items + "\n]\n"


def numbered_list() -> str:
    rng = random.Random(19)
    items = "".join(
        f"{k}. " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 10))) + "\n"
        for k in range(1, 80)
    )
    return "Steps:\n" + items


def song_with_refrain() -> str:
    refrain = "Row, row, row your boat, gently down the stream.\n" * 2
    return "".join(prose(500, seed=20 + k) + "\n" + refrain for k in range(6))


def short_stutter_recovered() -> str:
    return prose(2000, seed=26) + "Wait, let me check. " * 12 + prose(3000, seed=27)


def dashed_rule() -> str:
    return prose(800, seed=28) + "\n" + "-" * 600 + "\n" + prose(800, seed=29)


def multiplication_table() -> str:
    rows = "".join(f"{a} x {b} = {a * b}\n" for a in range(1, 13) for b in range(1, 13))
    return "Times tables:\n" + rows


def thinking_loop_escaped() -> str:
    loop = "Hmm, is 91 prime? It is 7 times 13, so no. " * 20
    return prose(1000, seed=30) + loop + "\nSo the answer is 89.\n" + prose(2500, seed=31)


def random_base64() -> str:
    rng = random.Random(32)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    blob = "".join(rng.choice(alphabet) for _ in range(6000))
    return "\n".join(blob[i : i + 76] for i in range(0, len(blob), 76))


@dataclass(frozen=True)
class Case:
    """One labelled text. ``numeric`` is the expected flag of a looping case's cycle."""

    name: str
    make: Callable[[], str]
    looping: bool
    numeric: bool = False


CASES: tuple[Case, ...] = (
    Case("sentence_repeated", sentence_repeated, True),
    Case("paragraph_repeated", paragraph_repeated, True),
    Case("counting_loop", counting_loop, True, numeric=True),
    Case("thinking_wait_loop", thinking_wait_loop, True),
    Case("code_block_repeated", code_block_repeated, True),
    Case("loop_after_20k", loop_after_20k, True),
    Case("long_period_loop", long_period_loop, True),
    Case("zeros_forever", zeros_forever, True),
    Case("newlines_forever", newlines_forever, True),
    Case("word_stutter", word_stutter, True),
    Case("bullet_block_loop", bullet_block_loop, True),
    Case("dotted_loop", dotted_loop, True),
    Case("rule_loop", rule_loop, True),
    Case("square_search_loop", square_search_loop, True, numeric=True),
    Case("cjk_loop", cjk_loop, True),
    Case("normal_prose", normal_prose, False),
    Case("separator_rules", separator_rules, False),
    Case("hundred_zeros", hundred_zeros, False),
    Case("long_zero_list", long_zero_list, False),
    Case("markdown_table", markdown_table, False),
    Case("repeated_asserts", repeated_asserts, False),
    Case("csv_numbers", csv_numbers, False),
    Case("similar_functions", similar_functions, False),
    Case("training_log", training_log, False),
    Case("json_records", json_records, False),
    Case("numbered_list", numbered_list, False),
    Case("song_with_refrain", song_with_refrain, False),
    Case("short_stutter_recovered", short_stutter_recovered, False),
    Case("dashed_rule", dashed_rule, False),
    Case("multiplication_table", multiplication_table, False),
    Case("thinking_loop_escaped", thinking_loop_escaped, False),
    Case("random_base64", random_base64, False),
)
