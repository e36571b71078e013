"""What the lab's host scripts (lab/lab, lab/files/pct) need from the host: the absolute paths they reference and
the commands they run, read from the scripts' text. A small reader, not a bash parser: it is tuned to the scripts
it reads and fails loudly (an unknown command or path) rather than guessing."""
import re

# Words that start a simple command in these scripts but are bash itself (keywords, builtins).
BASH_WORDS = {
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "in", "function",
    "return", "exit", "local", "export", "unset", "set", "shift", "echo", "printf", "read", "cd", "pwd", "test",
    "[", "[[", "]", "]]", "true", "false", ":", ".", "source", "exec", "trap", "wait", "kill", "type", "command",
    "mapfile", "declare", "break", "continue", "eval", "!", "{", "}", "(", ")", "((", "))", "time", "let",
}
# Prefix words whose next word is the command that runs.
PREFIXES = {"exec", "command", "!", "then", "else", "do", "time", "if", "while", "until", "elif", "{", "("}

HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")
ABS_PATH = re.compile(r"(?<![\w$}./-])(/(?:usr|etc|lib|lib64|bin|sbin|opt|var|run|proc|dev|sys)(?:/[\w.+-]+)+)")
FUNC_DEF = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\)\s*\{", re.M)
ASSIGN = re.compile(r"^[A-Za-z_]\w*(\[[^]]*\])?\+?=")


def _without_heredocs(text):
    out, end = [], None
    for line in text.splitlines():
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        m = HEREDOC.search(line)
        if m:
            end = m.group(1)
        out.append(line)
    return "\n".join(out)


def mask(text):
    """The script with comments, quoted text and arithmetic blanked out (to 'x'), command substitutions inside
    double quotes kept, line continuations joined: what is left are the words bash would run."""
    text = _without_heredocs(text).replace("\\\n", "")
    out, stack, i, n = [], ["code"], 0, len(text)
    while i < n:
        ch, state = text[i], stack[-1]
        two = text[i:i + 2]
        if state == "single":
            out.append(ch if ch == "'" else "x")
            if ch == "'":
                stack.pop()
        elif state == "double":
            if ch == "\\":
                out.append("xx"); i += 2; continue
            if two == "$(" and text[i:i + 3] != "$((":
                out.append(two); stack.append("code"); i += 2; continue
            out.append(ch if ch == '"' else "x")
            if ch == '"':
                stack.pop()
        elif state == "arith":
            out.append(")" if ch == ")" else "x")
            if two == "))":
                out.append(")"); stack.pop(); i += 2; continue
        else:
            if ch == "#" and (i == 0 or text[i - 1] in " \t\n;("):
                j = text.find("\n", i)
                j = n if j < 0 else j
                out.append(" " * (j - i)); i = j; continue
            if ch == "\\":
                out.append(text[i:i + 2]); i += 2; continue
            if ch == "'":
                stack.append("single")
            elif ch == '"':
                stack.append("double")
            elif two == "((" or text[i:i + 3] == "$((":
                k = 3 if text[i] == "$" else 2
                out.append(text[i:i + k]); stack.append("arith"); i += k; continue
            elif two == "$(":
                out.append(two); stack.append("code"); i += 2; continue
            elif ch == ")" and len(stack) > 1:
                stack.pop()
            out.append(ch)
        i += 1
    return "".join(out)


def functions(text):
    return set(FUNC_DEF.findall(text))


def absolute_paths(text):
    """Every absolute host path written literally in the script (here-documents included: a config the script
    writes, such as sshd_config's sftp subsystem, references host files too)."""
    return set(ABS_PATH.findall(text))


def _segments(line):
    # Where a new simple command starts: after | ; && || $( <( ` and at the line start.
    return re.split(r"\|\||&&|\$\(|<\(|`|[|;]", line)


def commands(text):
    """The external commands the script runs: the first word of each simple command that is not bash itself, a
    function of the script, a variable or an assignment."""
    own = functions(text)
    found = set()
    for line in mask(text).splitlines():
        # a case pattern ('up) cmd_up ;;', 'a|b)') or a function header ('name() {')
        line = re.sub(r"^\s*(?:[\w*.|\[\]-]+\)|[\w-]+\s*\(\))", " ", line)
        for seg in re.split(r"\|\||&&|\$\(|<\(|`|[|;&]", line):
            words = seg.split()
            while words and (words[0] in PREFIXES or ASSIGN.match(words[0])):
                words.pop(0)
            if not words:
                continue
            w = words[0]
            if w in BASH_WORDS or w in own or not re.match(r"^[a-z][\w.+-]*$", w):
                continue
            found.add(w)
    return found
