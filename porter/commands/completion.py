"""`porter completion SHELL`: a completion script for bash, zsh or fish, generated from porter's
own parser (every command's options, the choices of those that have them), so that it can
never offer an option the parser refuses or miss one it takes."""

from __future__ import annotations

import argparse

HELP = ("print a shell completion script (bash, zsh or fish) generated from porter's own "
        "parser")

SHELLS = ("bash", "zsh", "fish")


def add_arguments(parser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell the script is for")


def command_options(build_parser, names) -> dict[str, tuple[list[str], dict[str, list[str]]]]:
    """command -> (its option strings, option -> its choices), read off each command's parser."""
    table = {}
    for name in names:
        top = build_parser(name)
        sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
        options, choices = [], {}
        for action in parser._actions:
            for option in action.option_strings:
                options.append(option)
                if action.choices and not isinstance(action, argparse._SubParsersAction):
                    choices[option] = [str(c) for c in action.choices]
        positional = [str(c) for a in parser._actions if not a.option_strings and a.choices
                      for c in a.choices]
        choices[""] = positional        # the command's first word: `cache info`, `ci init`
        table[name] = (sorted(options), choices)
    return table


def bash(table, commands) -> str:
    cases = []
    for name, (options, choices) in table.items():
        valued = "".join(f'      {opt}) COMPREPLY=($(compgen -W "{" ".join(values)}" -- "$cur")); return;;\n'
                         for opt, values in choices.items() if opt)
        words = " ".join(options + choices[""])
        cases.append(f"    {name})\n      case \"$prev\" in\n{valued}      esac\n"
                     f"      COMPREPLY=($(compgen -W \"{words}\" -- \"$cur\"));;\n")
    return ("# porter completion bash: eval \"$(porter completion bash)\"\n"
            "_porter() {\n"
            "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=\"\" w\n"
            "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n"
            "    case \"$w\" in -*) ;; *) cmd=$w; break;; esac\n"
            "  done\n"
            "  case \"$cmd\" in\n"
            f"    \"\") COMPREPLY=($(compgen -W \"{' '.join(commands)} help -q -v --root --color -V --version -h --help\" -- \"$cur\"));;\n"
            + "".join(cases) +
            "  esac\n"
            "}\n"
            "complete -o default -F _porter porter\n")


def zsh(table, commands) -> str:
    # zsh runs bash's completion functions through bashcompinit: one generated body for both
    return ("#compdef porter\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash(table, commands))


def fish(table, commands) -> str:
    lines = ["# porter completion fish: porter completion fish | source",
             "complete -c porter -f",
             f"complete -c porter -n __fish_use_subcommand -a '{' '.join(commands)} help'"]
    for name, (options, choices) in table.items():
        cond = f"__fish_seen_subcommand_from {name}"
        if choices[""]:
            lines.append(f"complete -c porter -n '{cond}' -a '{' '.join(choices[''])}'")
        for option in options:
            flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
            values = choices.get(option)
            extra = f" -x -a '{' '.join(values)}'" if values else ""
            lines.append(f"complete -c porter -n '{cond}' {flag}{extra}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    commands = list(args._commands)
    table = command_options(args._build_parser, commands)
    print({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](table, commands), end="")
    return 0
