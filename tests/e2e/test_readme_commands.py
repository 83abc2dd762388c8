"""Every command in the README's command blocks works as written, without training: the scripts it names exist,
their flags exist, scripts/train.py's overrides compose and pass the run's checks (in-process, Compose API), and
the make targets exist. Also: the README is short (a newcomer reads it to the end), its first command sets up and
runs the main job and its second passes the tests (what CI runs), and every docs/ page and anchor it links to
exists."""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from contextlib import redirect_stdout
from functools import cache
from io import StringIO
from pathlib import Path

import pytest

from attention_lab.run.overrides import is_override, override_key
from attention_lab.run.sweep_resume import ADDED_ON_RESUME
from conftest import ROOT, TRAIN, check_command_line, compose_config, run_script

README = ROOT / "README.md"
MAX_LINES = 300
PLACEHOLDER = re.compile(r"<[^<>]+>")  # <date>, <run dir>, ...: a value the reader fills in


def command_blocks(text: str) -> list[str]:
    """The commands of the ```bash blocks, in order: comments dropped, continued lines joined."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = PLACEHOLDER.sub(lambda found: found.group(0).replace(" ", "_"), line)  # <run dir>: one word
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def readme_commands() -> list[str]:
    return command_blocks(README.read_text())


def make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def makefile_default(name: str) -> str:
    return re.search(rf"^{name} \?= (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1).strip()


@cache
def hydra_flags() -> frozenset[str]:
    """The flags Hydra's command line takes, as `train.py --hydra-help` lists them (e.g. `--cfg,-c : ...`)."""
    listed = run_script(TRAIN, "--hydra-help", check=True).stdout
    return frozenset(flag for names in re.findall(r"^(-[\w,-]+) :", listed, re.MULTILINE) for flag in names.split(","))


@cache
def help_text(script: Path, command: tuple[str, ...] = ()) -> str:
    """What an argparse script prints for --help (``command``: a subcommand's, `findings.py check --help`), from
    its own main() (in-process)."""
    spec = importlib.util.spec_from_file_location(f"readme_{script.stem}", script)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(script.parent))  # as Python runs a script: its folder first (benchmark.py imports from it)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(script.parent))
    out = StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit) as exited:
        module.main([*command, "--help"])
    assert exited.value.code == 0, f"{script.name} {' '.join(command)} --help exited {exited.value.code}"
    return out.getvalue()


def script_flags(script: Path, command: tuple[str, ...] = ()) -> frozenset[str]:
    """The options the script (or its subcommand) lists under its --help."""
    lines = help_text(script, command).splitlines()
    options = [line.strip().split("  ")[0] for line in lines if line.strip().startswith("-")]
    return frozenset(flag for option in options for flag in re.findall(r"(?<![\w-])--?[\w-]+", option))


def subcommands(script: Path) -> frozenset[str]:
    """The subcommands a script's --help names in its ``{a,b}`` line (none for most scripts)."""
    listed = re.search(r"^\s*\{([\w,-]+)\}", help_text(script), re.MULTILINE)
    return frozenset(listed.group(1).split(",")) if listed else frozenset()


SEED_SWEEP = re.compile(r"seed=(\d+)(?:,\d+)*,(\d+)")  # seed=0,1,...,19: a sweep of whole numbers


def first_and_last_seed(override: str) -> str:
    """A sweep over whole-number seeds is checked at its first and last seed: no check branches on a seed's value,
    and each seed is another composition (a docs sweep of 20 seeds composes 20 configs). Any other seed list is
    checked whole."""
    found = SEED_SWEEP.fullmatch(override)
    return f"seed={found.group(1)},{found.group(2)}" if found else override


def check_train(args: list[str]) -> None:
    flags = [arg for arg in args if arg.startswith("-")]
    unknown = [flag for flag in flags if flag not in hydra_flags()]
    assert not unknown, f"train.py has no flag {unknown}"
    overrides = []
    for arg in args:
        if "=" in arg and PLACEHOLDER.search(arg):
            key = arg.split("=", 1)[0]  # a value to fill in (resume=<run dir>): the setting itself must exist
            assert key in compose_config(), f"{arg}: there is no setting {key!r}"
        else:
            overrides.append(arg)
    if any(arg.startswith("resume=") for arg in args):  # the rest comes from the record: only what a resume adds
        added = [arg for arg in overrides if is_override(arg)]
        refused = [arg for arg in added if override_key(arg) not in ADDED_ON_RESUME]
        assert not refused, f"a resume may not add {refused}"
        overrides = [arg for arg in overrides if arg not in added]
    if "--cfg" in flags or "--help" in flags:  # prints, trains nothing: the rest must still compose
        overrides = [arg for arg in overrides if arg not in ("--cfg", "-c", "job", "hydra", "all", "--help")]
    check_command_line([first_and_last_seed(arg) for arg in overrides])


def check_script(script: Path, args: list[str]) -> None:
    command = tuple(args[:1]) if args and args[0] in subcommands(script) else ()
    flags = script_flags(script, command)
    unknown = [arg.split("=")[0] for arg in args if arg.startswith("-") and arg.split("=")[0] not in flags]
    assert not unknown, f"{script.name} {' '.join(command)} has no flag {unknown}"


def check_command(command: str) -> None:
    words = shlex.split(command)
    program, args = words[0], words[1:]
    if program == "make":
        target, *settings = args
        assert target in make_targets(), f"the Makefile has no target {target!r}"
        for setting in settings:
            name, value = setting.split("=", 1)
            if name == "ARGS" and target == "train":
                check_train(shlex.split(value))
        return
    if program == "source":
        assert args == [f"{makefile_default('VENV')}/bin/activate"], f"{command}: not the venv make setup creates"
        return
    assert program == "python", f"{command}: a README command is make, source or python"
    script = ROOT / args[0]
    assert script.is_file(), f"{args[0]} does not exist"
    if script == TRAIN:
        check_train(args[1:])
    else:
        check_script(script, args[1:])


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES}: move detail to docs/"


def test_the_first_command_trains_and_the_second_passes_the_tests():
    commands = readme_commands()
    assert commands[:2] == ["make train", "make test"]
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith(("#", " "))]
    assert ci[-1] == commands[1], "CI (.ci/run) must run the README's test command"


@pytest.mark.parametrize("command", readme_commands())
def test_a_readme_command_works_as_written(command: str):
    check_command(command)


def docs_commands() -> list[str]:
    """The lab's commands in the docs pages' command blocks (not those of other tools: sinfo, apt-get, ...), less the
    README's (checked above) and the bare experiment sweeps (`-m experiment=<preset>`, with or without a launcher:
    tests/test_experiments.py and tests/data/test_mqar.py compose and check every job of every preset, and the launcher
    changes no job's config), and a sweep that another command of the set runs the same but for its launcher (its jobs
    are those, checked there)."""
    commands = {command for page in sorted((ROOT / "docs").glob("*.md")) for command in command_blocks(page.read_text())
                if command.split()[0] in ("python", "make", "source")}
    preset_sweeps = {command for command in commands if re.fullmatch(r"python scripts/train\.py -m experiment=\w+( hydra/launcher=\w+)?", command)}
    relaunched = {command for command in commands if re.sub(r" hydra/launcher=\w+$", "", command) in commands - {command}}
    return sorted(commands - set(readme_commands()) - preset_sweeps - relaunched)


@pytest.mark.parametrize("command", docs_commands())
def test_a_docs_command_works_as_written(command: str):
    check_command(command)


@pytest.mark.parametrize(("command", "named"), [
    ("python scripts/trian.py", "trian.py"),                               # no such script
    ("python scripts/train.py model=selff", "selff"),                      # no such option
    ("python scripts/train.py heads=5", "heads=5"),                        # composes, but the run's checks refuse it
    ("python scripts/train.py -m model=self,multihead heads=1,5", "heads=5"),  # a sweep refused whole
    ("python scripts/train.py --cgf job", "--cgf"),                        # no such flag
    ("python scripts/train.py reusme=outputs/runs/<date>/<time>", "reusme"),  # a value to fill in, of no setting
    ("python scripts/train.py resume=outputs/multirun/<date>/<time> model=self", "model=self"),  # kept from the record
    ("python scripts/compare.py outputs/multirun/<date>/<time> --plots", "--plots"),
    ("make trian", "trian"),
    ("source venv/bin/activate", "venv/bin/activate"),
])
def test_a_broken_command_is_caught(command: str, named: str):
    """The check above fails on what a README could get wrong, and says what."""
    with pytest.raises(Exception, match=re.escape(named)):
        check_command(command)


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {github_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def test_every_docs_link_of_the_readme_exists():
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", README.read_text())
    assert len({path for path, _ in links}) >= 8, "the README links its docs pages"
    for path, anchor in links:
        target = ROOT / path
        assert target.is_file(), f"README links {path}, which does not exist"
        if anchor:
            assert anchor in anchors(target), f"README links {path}#{anchor}: no such heading"


def test_every_link_between_the_docs_pages_exists():
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
        for path, anchor in re.findall(r"\]\(([^)#\s:]*)(?:#([^)\s]+))?\)", text):
            target = (page.parent / path) if path else page
            assert target.exists(), f"docs/{page.name} links {path}, which does not exist"
            if anchor:
                assert anchor in anchors(target), f"docs/{page.name} links {path}#{anchor}: no such heading"


def test_the_anchor_check_knows_githubs_ids():
    assert github_anchor("Zoology's recall gap: why attention, and not something cheaper") == \
        "zoologys-recall-gap-why-attention-and-not-something-cheaper"
    assert github_anchor("How `make setup` installs") == "how-make-setup-installs"


def test_records_md_lists_what_a_resume_may_add():
    """docs/records.md says what a resume may add to a sweep's command line: the lab's own list, no more, no less."""
    text = (ROOT / "docs" / "records.md").read_text()
    section = text[text.index("## What a resume may add"):]
    section = section[:section.index("\n## ", 1)]
    listed = set(re.findall(r"^- (.+)$", section, re.MULTILINE))
    names = {name for line in listed for name in re.findall(r"`([\w./]+)`", line)}
    assert names == set(ADDED_ON_RESUME)
