"""One command-line grammar (issue 36): global options before the command, no abbreviations,
suggestions for a misspelt command or option, `porter help CMD`, `-V`, examples in every
command's --help that parse, completion scripts generated from the parser, and an option that
does nothing in the given combination refused."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from porter import cli, exit_codes


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, expected", [
    (["-q", "status", "x"], ["status", "-q", "x"]),
    (["--root", "D", "-v", "test", "x", "--dtype", "f"], ["test", "--root", "D", "-v", "x", "--dtype", "f"]),
    (["--root=D", "status", "x"], ["status", "--root=D", "x"]),
    (["--color", "never", "check"], ["check", "--color", "never"]),
    (["-vv", "check"], ["check", "-vv"]),
    (["status", "x", "-q"], ["status", "x", "-q"]),            # already after: unchanged
    (["help"], ["--help"]),
    (["help", "test"], ["test", "--help"]),
    (["-q", "help", "test"], ["test", "--help"]),
])
def test_global_options_move_behind_the_command(argv, expected):
    assert cli._command_first(argv) == expected


def test_a_command_option_before_the_command_says_where_it_goes(capsys):
    code, _, err = _run(capsys, "--dtype", "float16", "test", "heaviside")
    assert code == exit_codes.BAD_INPUT
    assert err.strip() == ("porter: error: --dtype is an option of a command, not of porter itself "
                           "(write it after the command: porter test ... --dtype)")


def test_global_options_before_the_command_reach_it(capsys):
    root = str(cli.__file__).rsplit("/porter/", 1)[0] + "/fixtures/mini-pytorch"
    before = _run(capsys, "--root", root, "-q", "status", "heaviside")
    after = _run(capsys, "status", "heaviside", "--root", root, "-q")
    assert before == after and before[0] == exit_codes.OK and "heaviside" in before[1]


@pytest.mark.parametrize("argv, says", [
    (["tset", "heaviside"], "unknown command 'tset' (did you mean `porter test`? see `porter --help`)"),
    (["help", "stauts"], "unknown command 'stauts' (did you mean `porter status`? see `porter --help`)"),
    (["frobnicate"], "unknown command 'frobnicate' (see `porter --help`)"),
    (["test", "heaviside", "--dtyp", "float16"],
     "unrecognized arguments: --dtyp float16 (did you mean --dtype? see `porter test --help`)"),
    (["status", "heaviside", "--rot", "x"],
     "unrecognized arguments: --rot x (did you mean --root? see `porter status --help`)"),
])
def test_no_abbreviation_and_a_suggestion_for_a_misspelling(capsys, argv, says):
    code, out, err = _run(capsys, *argv)
    assert code == exit_codes.BAD_INPUT and not out
    assert err == f"porter: error: {says}\n"


def test_version_short_and_long(capsys):
    assert _run(capsys, "-V") == _run(capsys, "--version")
    code, out, _ = _run(capsys, "-V")
    assert code == exit_codes.OK and out.startswith("porter ")


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_help_cmd_is_cmd_help_and_ends_with_examples_that_parse(capsys, name):
    code, out, _ = _run(capsys, "help", name)
    assert code == exit_codes.OK
    assert (code, out) == _run(capsys, name, "--help")[:2]
    assert "examples:" in out
    examples = cli.EXAMPLES[name]
    assert examples                     # every command shows at least one
    for what, line in examples:
        assert f"  # {what}\n  $ {line}" in out
        # the porter words of the line: inside `$(...)`, before a redirection
        words = shlex.split(line.split("$(", 1)[-1].rstrip(')"').split(" > ", 1)[0])
        assert words[0] == "porter" and words[1] == name
        # the example is a command line porter's parser takes as it is
        parsed, extra = cli.build_parser(name).parse_known_args(words[1:])
        assert not extra and parsed.command == name, line


def test_top_help_lists_help_the_global_options_and_examples_that_parse(capsys):
    code, out, _ = _run(capsys, "--help")
    assert code == exit_codes.OK and (code, out) == _run(capsys, "help")[:2]
    assert re.search(r"^    help +a command's help", out, re.M)
    for option in ("-q, --quiet", "-v, --verbose", "--color WHEN", "--root DIR"):
        assert f"\n  {option}" in out.split("options every command takes", 1)[1]
    lines = [line.split("$ ", 1)[1] for line in out.split("examples:", 1)[1].splitlines() if "$ " in line]
    assert lines
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "porter"
        if words[1] == "help":
            assert words[2] in cli.COMMANDS
            continue
        parsed, extra = cli.build_parser(words[1]).parse_known_args(words[1:])
        assert not extra and parsed.command == words[1], line


def test_every_command_has_examples_and_nothing_else_does():
    assert set(cli.EXAMPLES) == set(cli.COMMANDS)


def _completion(capsys, shell):
    code, out, err = _run(capsys, "completion", shell)
    assert code == exit_codes.OK, err
    return out


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_offers_every_command_and_every_option_the_parser_takes(capsys, shell):
    script = _completion(capsys, shell)
    checked = 0
    for name in cli.COMMANDS:
        assert name in script
        sub = cli.build_parser(name)._subparsers._group_actions[0].choices[name]
        for action in sub._actions:
            for option in action.option_strings:
                spelled = option if shell != "fish" else (
                    f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}")
                assert spelled in script, (name, option)
                checked += 1
    assert checked > 100        # every command's options, not an empty table


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_completion_script_is_valid_shell(capsys, shell):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    done = subprocess.run([shell, "-n"], input=_completion(capsys, shell), text=True,
                          capture_output=True)
    assert done.returncode == 0, done.stderr


def test_bash_completion_completes_a_command_and_an_option(capsys):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    script = _completion(capsys, "bash")

    def complete(*words):
        probe = (script + f"COMP_WORDS=({' '.join(map(shlex.quote, words))}); "
                 f"COMP_CWORD={len(words) - 1}; _porter; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        return subprocess.run(["bash", "-c", probe], text=True, capture_output=True,
                              check=True).stdout.split()

    assert complete("porter", "te") == ["test"]
    assert "--reference-inputs" in complete("porter", "test", "--ref")
    assert complete("porter", "test", "--color", "ne") == ["never"]
    assert complete("porter", "cache", "cl") == ["clear"]


@pytest.mark.parametrize("argv, says", [
    (["test", "heaviside", "--dry-run"], "--dry-run does nothing without --prune-xfails"),
    (["test", "heaviside", "--allow-dirty"], "--allow-dirty does nothing without --prune-xfails"),
    (["audit-xfails", "--dry-run"], "--dry-run does nothing without --prune-xfails"),
    (["audit-xfails", "--allow-dirty"], "--allow-dirty does nothing without --prune-xfails"),
])
def test_an_option_that_would_do_nothing_is_refused(capsys, mini_root, argv, says):
    code, out, err = _run(capsys, *argv, "--root", str(mini_root))
    assert code == exit_codes.BAD_INPUT and not out
    assert err.startswith(f"porter: error: {says} (add --prune-xfails, or drop ")


def test_audit_xfails_names_pruning_as_porter_test_does():
    audit = cli.build_parser("audit-xfails").parse_args(["audit-xfails", "--prune-xfails"])
    older = cli.build_parser("audit-xfails").parse_args(["audit-xfails", "--prune"])
    assert audit.prune and older.prune


def test_pr_takes_the_text_format_every_command_takes():
    parsed = cli.build_parser("pr").parse_args(["pr", "heaviside", "--format", "text"])
    assert parsed.format == "text"


@pytest.mark.parametrize("spec", [
    "porter-mps @ git+https://github.com/OWNER/porter@COMMIT",
    "porter-mps @ git+https://github.com/OWNER/porter@SHA",
    "porter-mps @ git+https://github.com/me/porter@COMMIT",
])
def test_ci_init_refuses_the_placeholder_spec(spec):
    from porter.commands.ci import render_workflow
    from porter.errors import PorterError
    with pytest.raises(PorterError, match="placeholders"):
        render_workflow(porter_spec=spec)


def test_ci_init_takes_a_real_spec():
    from porter.commands.ci import render_workflow
    text = render_workflow(porter_spec="porter-mps @ git+https://github.com/ada/porter@4f2a9c1")
    assert "github.com/ada/porter@4f2a9c1" in text


@pytest.mark.parametrize("supported, asked, says", [
    # --dtype named only what the MPS test does not send: the advice is the dtype, not a port
    (["float16", "bfloat16", "float32"], ["float64"],
     "the MPS test of hypot sends none of float64; pass --dtype with one it sends "
     "(float16, bfloat16, float32), or none for all of them"),
    # every dtype the test sends skipped (no kernel registered on this device): port it
    (["float16", "float32"], ["float16", "float32"], "port it first: `porter migrate-from-mpsgraph hypot`"),
    # every dtype skipped by the checkout's expectations (review 32's D21): not a port to write
    (["float16", "float32"], ["float16", "float32"],
     "the checkout's expectations skip every dtype of hypot (SKIPLIST['hypot']), so a Mac's test "
     "skips it too, and a run that tests nothing is not green; remove the entry to test the port"),
])
def test_nothing_tested_says_what_is_missing(supported, asked, says):
    from porter.harness.session import nothing_tested
    from porter.harness.verdicts import SKIP, DtypeResult, OpResult
    listed = "SKIPLIST" in says
    result = OpResult("hypot", "hypot", "", "hypot", "emulate", supported=supported,
                      dtypes=[DtypeResult(d, SKIP, expected_by=["SKIPLIST['hypot']"] if listed else [],
                                          message="skipped by SKIPLIST['hypot']" if listed else "why")
                              for d in asked])
    assert says in nothing_tested([result])
