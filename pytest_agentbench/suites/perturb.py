"""Seeded perturbations of a task, for robustness runs (``--agentbench-perturb``).

A perturbation is a pure function: a task and a seed in, a perturbed copy out, its id
``<id>@<name>`` and ``original_id`` the task it came from (the reports pair the two). The
random choices come from ``random.Random`` seeded with a string of the seed, the
perturbation and the task, so the same seed gives the same perturbed tasks on any
machine and under any ``PYTHONHASHSEED``.

- ``shuffle``: the choices in another order (never the same one), the target remapped
  to the option it named. Tasks without choices get no shuffled copy.
- ``whitespace``: doubled spaces and line breaks between some words of the input.
- ``case``: some words of the input in upper or lower case.
- ``distractor``: an unrelated sentence before or after the input.
- ``paraphrase``: the input as a plugin rewrites it (the ``pytest_agentbench_paraphrase``
  hook); the caller passes the function.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import replace

from pytest_agentbench.core.jsontypes import JsonValue
from pytest_agentbench.suites.task import Task
from pytest_agentbench.suites.template import render_choices

BUILTIN = ("shuffle", "whitespace", "case", "distractor")
PERTURBATIONS = (*BUILTIN, "paraphrase")
SEPARATOR = "@"

#: Sentences with nothing to do with any task: what a distractor adds.
DISTRACTORS = (
    "The library on the corner closes early on public holidays.",
    "Some people prefer tea to coffee in the afternoon.",
    "A red bicycle was left leaning against the fence yesterday.",
    "The train to the coast runs every forty minutes in summer.",
    "Many houseplants grow well in indirect sunlight.",
    "The museum added a new wing for maritime history last year.",
    "Fresh snow fell on the mountains overnight.",
    "Her cousin collects stamps from small island nations.",
)

#: A paraphrase function: the task and its seeded random generator in, the new input out
#: (None: this task gets no paraphrased copy).
Paraphrase = Callable[[Task, random.Random], "str | None"]


def rng_for(task: Task, name: str, seed: int) -> random.Random:
    """The generator of one perturbation of one task (a string seed: stable everywhere)."""
    return random.Random(f"agentbench:{seed}:{name}:{task.suite}:{task.id}")


def perturbed_id(task_id: str, name: str) -> str:
    return f"{task_id}{SEPARATOR}{name}"


def _with_input(task: Task, text: str, name: str, seed: int) -> Task:
    """The task with ``text`` as its input, in the prompt where the input stood (the
    whole prompt when the template did not place it verbatim)."""
    if task.input and task.input in task.prompt:
        prompt = task.prompt.replace(task.input, text, 1)
    else:
        prompt = text
    return replace(
        task,
        id=perturbed_id(task.id, name),
        input=text,
        prompt=prompt,
        perturbation=name,
        original_id=task.id,
        perturbation_seed=seed,
    )


def _shuffle(task: Task, seed: int) -> Task | None:
    count = len(task.choices)
    if count < 2:
        return None
    rng = rng_for(task, "shuffle", seed)
    order = list(range(count))
    rng.shuffle(order)
    if order == list(range(count)):
        order = order[1:] + order[:1]  # never the original order
    choices = tuple(task.choices[i] for i in order)
    target = _remap(task.target, task.choices, order)
    old_block, new_block = render_choices(task.choices), render_choices(choices)
    prompt = task.prompt.replace(old_block, new_block, 1)
    return replace(
        task,
        id=perturbed_id(task.id, "shuffle"),
        choices=choices,
        target=target,
        prompt=prompt,
        perturbation="shuffle",
        original_id=task.id,
        perturbation_seed=seed,
    )


def _remap(target: JsonValue, choices: tuple[str, ...], order: list[int]) -> JsonValue:
    """The target naming the same option after the choices were put in ``order``
    (``order[new] = old``): an index stays an index, a letter a letter; the text of an
    option still names it. A target the choice verifier would refuse stays as it is."""
    from pytest_agentbench.errors import VerifierError
    from pytest_agentbench.suites.choice_target import LETTERS, expected_index

    try:
        old = expected_index(target, choices)
    except VerifierError:
        return target
    new = order.index(old)
    if isinstance(target, int) and not isinstance(target, bool):
        return new
    if isinstance(target, str) and re.fullmatch(r"[\(\[]?[A-Za-z][\)\].]?", target.strip()):
        return LETTERS[new]
    return target


_GAP = re.compile(r"(?<=\S) (?=\S)")


def whitespace_noise(text: str, rng: random.Random, rate: float = 0.25) -> str:
    """Some single spaces between words become two spaces or a line break; at least one
    changes when there is any."""
    gaps = [m.start() for m in _GAP.finditer(text)]
    if not gaps:
        return text + " "
    chosen = {g for g in gaps if rng.random() < rate} or {rng.choice(gaps)}
    out, last = [], 0
    for gap in gaps:
        if gap in chosen:
            out.append(text[last:gap])
            out.append(rng.choice(("  ", "\n", "   ")))
            last = gap + 1
    out.append(text[last:])
    return "".join(out)


_WORD = re.compile(r"[A-Za-z]{2,}")


def case_noise(text: str, rng: random.Random, rate: float = 0.2) -> str:
    """Some words in upper case, lower case or with the first letter swapped; at least
    one changes when there is a word of two letters or more."""
    words = [m for m in _WORD.finditer(text)]
    if not words:
        return text.swapcase()
    chosen = {m.start() for m in words if rng.random() < rate} or {rng.choice(words).start()}
    out, last = [], 0
    for match in words:
        if match.start() not in chosen:
            continue
        word = match.group()
        options = [
            w for w in (word.upper(), word.lower(), word[0].swapcase() + word[1:]) if w != word
        ]
        out.append(text[last : match.start()])
        out.append(rng.choice(options))
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def perturb_task(
    task: Task, name: str, seed: int, *, paraphrase: Paraphrase | None = None
) -> Task | None:
    """The ``name`` perturbation of ``task`` with ``seed``; None when it does not apply
    (a shuffle without choices, a paraphrase the plugin declined). ValueError for an
    unknown name or a paraphrase without a function."""
    if name == "shuffle":
        return _shuffle(task, seed)
    rng = rng_for(task, name, seed)
    if name == "whitespace":
        return _with_input(task, whitespace_noise(task.input, rng), name, seed)
    if name == "case":
        return _with_input(task, case_noise(task.input, rng), name, seed)
    if name == "distractor":
        sentence = rng.choice(DISTRACTORS)
        text = f"{sentence} {task.input}" if rng.random() < 0.5 else f"{task.input} {sentence}"
        return _with_input(task, text, name, seed)
    if name == "paraphrase":
        if paraphrase is None:
            raise ValueError(
                "perturbation paraphrase: no plugin implements pytest_agentbench_paraphrase"
            )
        reworded = paraphrase(task, rng)
        if reworded is None or reworded == task.input:
            return None
        return _with_input(task, reworded, name, seed)
    raise ValueError(f"perturbation: expected one of {', '.join(PERTURBATIONS)}, got {name!r}")


def parse_perturbations(text: str) -> tuple[str, ...]:
    """``shuffle,case`` as names, checked; ValueError naming what is wrong."""
    names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not names:
        raise ValueError(f"expected one or more of {', '.join(PERTURBATIONS)}, got {text!r}")
    unknown = [name for name in names if name not in PERTURBATIONS]
    if unknown:
        raise ValueError(
            f"unknown perturbation {unknown[0]!r}; expected one or more of "
            f"{', '.join(PERTURBATIONS)}, comma-separated"
        )
    return names
