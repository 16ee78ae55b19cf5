# bash completion for remora(1): commands, options, format and mode names, files, and the
# pids of Python processes for -p. Installed as share/bash-completion/completions/remora;
# needs nothing else (bash-completion's helpers are used when they are loaded).
# tests/functional/install_tests.py checks every option a command's --help lists is here.

_remora_pids()
{
    # processes whose executable (or, unreadable, argv[0]) is a python: pid and name
    local d pid exe name
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        exe=$(readlink "$d/exe" 2>/dev/null) || exe=
        [ -n "$exe" ] || { IFS= read -r -d '' exe < "$d/cmdline"; } 2>/dev/null
        name=${exe##*/}
        case $name in
            python|python[0-9]*|pypy*) ;;
            *) continue ;;
        esac
        [ "$pid" = "$$" ] || printf '%s\n' "$pid"
    done
}

_remora()
{
    local cur prev cmd i words_n
    COMPREPLY=()
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    # --mode=VALUE: bash splits the word at '=' (COMP_WORDBREAKS)
    if [ "$cur" = "=" ]; then
        cur=
    elif [ "$prev" = "=" ] && [ "$COMP_CWORD" -ge 2 ]; then
        prev=${COMP_WORDS[COMP_CWORD-2]}
    fi

    local commands="dump record top convert"
    local formats="flamegraph svg firefox speedscope collapsed table pstats pprof heatmap jsonl raw"
    local modes="wall cpu gil exception memory"
    local async_modes="running all"
    local engines="auto kernel user"
    local sorts="self total name own tottime cumulative cumul cumtime"
    local sampling="-h --help -p --pid -r --rate -d --duration --mode --gil --idle --no-gc
        --subprocesses --blocking --nonblocking --native --function --nolineno -l --limit
        --async --async-mode --engine --opcodes --fault-period --"

    # the command: the first word after remora that is not an option
    cmd=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            --) break ;;
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [ -z "$cmd" ]; then
        COMPREPLY=($(compgen -W "$commands --version --help" -- "$cur"))
        return 0
    fi

    # after "--" (record, top): the command to run
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [ "${COMP_WORDS[i]}" = "--" ]; then
            if declare -F _command_offset >/dev/null; then
                _command_offset $((i + 1))
            elif [ $((i + 1)) -eq "$COMP_CWORD" ]; then
                COMPREPLY=($(compgen -c -- "$cur"))
            else
                COMPREPLY=($(compgen -f -- "$cur"))
            fi
            return 0
        fi
    done

    case $prev in
        -p|--pid)
            COMPREPLY=($(compgen -W "$(_remora_pids)" -- "$cur"))
            return 0 ;;
        -f|--format)
            if [ "$cmd" = convert ]; then
                COMPREPLY=($(compgen -W "${formats% raw}" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$formats" -- "$cur"))
            fi
            return 0 ;;
        --mode)
            COMPREPLY=($(compgen -W "$modes" -- "$cur"))
            return 0 ;;
        --async-mode)
            COMPREPLY=($(compgen -W "$async_modes" -- "$cur"))
            return 0 ;;
        --engine)
            COMPREPLY=($(compgen -W "$engines" -- "$cur"))
            return 0 ;;
        --sort)
            COMPREPLY=($(compgen -W "$sorts" -- "$cur"))
            return 0 ;;
        --root)
            COMPREPLY=($(compgen -d -- "$cur"))
            return 0 ;;
        -o|--output|--core|--exe|--diff)
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0 ;;
        -r|--rate|-d|--duration|-l|--limit|--max-samples)
            return 0 ;;                 # a number: nothing to offer
    esac

    local opts
    case $cmd in
        dump)
            opts="-h --help -p --pid --core --exe --root --json --subprocesses --native
                --locals --async --no-source --opcodes" ;;
        record)
            opts="$sampling -o --output -f --format --stats --max-samples --diff
                --frame-anchor --every --control --sort" ;;
        top)
            opts=$sampling ;;
        convert)
            opts="-h --help -o --output -f --format -l --limit --sort --diff" ;;
        *)
            return 0 ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [ "$cmd" = convert ]; then
        COMPREPLY=($(compgen -f -- "$cur"))     # INPUT
    fi
    return 0
}

complete -o filenames -F _remora remora
