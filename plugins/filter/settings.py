# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Range checks of role settings, which a role's argument spec cannot express: it checks that a port is an
int, not that it is at most 65535. Each role's tasks/preflight.yml lists its settings with a rule and refuses, before
anything changes, every one that breaks its rule, naming the setting.

A value is read as Ansible's argument spec reads it (an int from `-e gpuserve_port=70000` arrives as the string
"70000"), except that a boolean is never a number. A value that is None (an unset optional setting) is not checked.
A rule ending in [] applies to each item of a list.
"""

import json
import math

from ansible.errors import AnsibleFilterError

# rule: (whole number, lowest, lowest excluded, highest, what it must be)
RULES = {
    "port": (True, 1, False, 65535, "a TCP port, a whole number from 1 to 65535"),
    "count": (True, 1, False, None, "a whole number, 1 or more"),
    "whole": (True, 0, False, None, "a whole number, 0 or more"),
    "seconds": (False, 0, True, None, "a number of seconds above 0"),
    "seconds_or_zero": (False, 0, False, None, "a number of seconds, 0 or more"),
    "percent": (False, 0, False, 100, "a percentage from 0 to 100"),
    "fraction": (False, 0, True, 1, "a fraction above 0, at most 1"),
    "accept_length": (False, 1, False, None, "tokens per verify step, 1 or more"),
}


def _number(value, whole):
    """The value as a number of its kind, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            try:
                value = float(value.strip())
            except ValueError:
                return None
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if whole and value != int(value):
        return None
    return int(value) if whole else value


def _problem(name, value, rule):
    if rule not in RULES:
        raise AnsibleFilterError("setting_problems: %s has rule %r; the rules are %s" % (name, rule, ", ".join(RULES)))
    whole, low, low_open, high, what = RULES[rule]
    number = _number(value, whole)
    ok = number is not None and (number > low if low_open else number >= low) and (high is None or number <= high)
    return None if ok else "%s is %s: it must be %s" % (name, json.dumps(value, default=str), what)


def setting_problems(settings):
    """One sentence per setting that breaks its rule: settings is a list of {name, value, rule[, why]}."""
    problems = []
    for setting in settings or []:
        name, value, rule = setting["name"], setting.get("value"), setting["rule"]
        if value is None:
            continue
        if rule.endswith("[]"):
            if not isinstance(value, (list, tuple)):
                found = ["%s is %s: it must be a list" % (name, json.dumps(value, default=str))]
            else:
                found = [_problem("%s item %d" % (name, i), item, rule[:-2]) for i, item in enumerate(value)]
        else:
            found = [_problem(name, value, rule)]
        why = (" (%s)" % setting["why"]) if setting.get("why") else ""
        problems.extend(p + why for p in found if p)
    return problems


class FilterModule:
    def filters(self):
        return {"setting_problems": setting_problems}
