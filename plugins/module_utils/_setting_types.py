# Copyright: gpuserve engineers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection. Role settings of the wrong type, said in the user's words: the setting, what was given,
what it must be, with an example. ansible-core's own check of a role's argument spec says "argument 'x' is of type
list and we were unable to convert to dict: <class '...'> cannot be converted to a dict"; the action
gpuserve.sglang.setting_types runs this before any role's own check (role setting_types, a dependency of every role).

A value is accepted exactly when ansible-core's validator accepts it (the same ArgumentSpecValidator), except a
string given for a list or a mapping, and a list or a mapping given for a string: ansible-core splits "a,b" into a
list, parses "k=v" into a mapping and writes a mapping as its text, but a role reads the variable as it was set, so
it breaks later (a list of a string's characters)."""
from __future__ import annotations

import json

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

WHAT = {'str': 'a string', 'path': 'a path (a string)', 'int': 'a whole number', 'float': 'a number',
        'bool': 'true or false', 'dict': 'a mapping', 'list': 'a list', 'raw': 'any value'}
PLURAL = {'str': 'strings', 'path': 'paths', 'int': 'whole numbers', 'float': 'numbers', 'bool': 'true/false values',
          'dict': 'mappings', 'list': 'lists', 'raw': 'values'}
EXAMPLE = {'str': 'a', 'path': '/opt/example', 'int': 8, 'float': 0.5, 'bool': True, 'dict': {'key': 'value'},
           'list': ['a', 'b'], 'raw': 'a'}
SHOWN = 80  # characters of a given value shown in the message
# Examples of the settings that have no default to show their shape
EXAMPLES = {'sglang_server_args': {'model_path': '/models/Kimi-K2.5', 'tp_size': 8}}


def kind(value):
    """What a value is, in words."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true/false'
    if isinstance(value, int):
        return 'a whole number'
    if isinstance(value, float):
        return 'a number'
    if isinstance(value, str):
        return 'a string'
    if isinstance(value, dict):
        return 'a mapping'
    if isinstance(value, (list, tuple)):
        return 'a list'
    return 'a value of another kind'


def flow(value):
    """A value as it is written in YAML's flow style, the way an inventory sets it: [a, b], {k: v}, 'a string'."""
    if isinstance(value, dict):
        return '{%s}' % ', '.join('%s: %s' % (key, flow(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return '[%s]' % ', '.join(flow(item) for item in value)
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if value is None:
        return 'null'
    if isinstance(value, str):
        plain = (value and value[0] not in '[]{}!&*#|>@`"\'%? ' and not value.startswith('- ') and value != '-'
                 and ': ' not in value and ', ' not in value and not value.endswith(':'))
        return value if plain else json.dumps(value)
    return json.dumps(value, default=str)


def shown(value):
    text = json.dumps(value, default=str) if isinstance(value, str) else flow(value)
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + '...'


def expected(spec):
    """What a setting of this spec must be, in words."""
    kind_ = spec.get('type', 'str')
    if spec.get('choices'):
        return 'one of %s' % ', '.join(str(choice) for choice in spec['choices'])
    what = WHAT.get(kind_, kind_)
    if kind_ == 'list' and spec.get('elements'):
        what += ' of %s' % PLURAL.get(spec['elements'], spec['elements'])
    if kind_ == 'dict' and spec.get('options'):
        what += ' with the keys %s' % ', '.join(sorted(spec['options']))
    return what


def example(spec, default=None, name=''):
    """An example value: the setting's own default when it has one that shows its shape, else one of its type."""
    if name in EXAMPLES:
        return EXAMPLES[name]
    if default not in (None, '', [], {}) and not (isinstance(default, str) and '{{' in default):
        return default
    if spec.get('choices'):
        return spec['choices'][0]
    if spec.get('type') == 'list' and spec.get('elements'):
        return [0, 1, 2, 3] if spec['elements'] == 'int' else ['a', 'b'] if spec['elements'] == 'str' else [
            EXAMPLE.get(spec['elements'], 'a')]
    return EXAMPLE.get(spec.get('type', 'str'), 'value')


def problem(name, spec, value, default=None, description=''):
    """One sentence when value is not of the type the spec takes, else None. default: the setting's own default (the
    example); description: what the setting is, for the sentence's end."""
    wrong = ((isinstance(value, str) and spec.get('type') in ('list', 'dict'))
             or (isinstance(value, (dict, list)) and spec.get('type', 'str') in ('str', 'path')))
    if not wrong:
        result = ArgumentSpecValidator({name: spec}).validate({name: value}, validate_role_argument_spec=True)
        wrong = bool(result.error_messages)
    if not wrong:
        return None
    said = '%s is %s (%s): it must be %s, e.g. %s' % (name, kind(value), shown(value), expected(spec),
                                                      flow(example(spec, default, name)))
    if description:
        said += ' (%s)' % description
    if isinstance(value, str) and spec.get('type') in ('list', 'dict', 'int', 'float', 'bool'):
        said += ('. On the command line give it as JSON, which keeps its type: -e \'{"%s": %s}\''
                 % (name, json.dumps(example(spec, default, name), default=str)))
    return said + '.'


def problems(specs, values, default_of=None):
    """The sentences for every setting in values whose type its spec does not take. specs: {name: spec}; values:
    {name: value as set}; default_of(name): the setting's own default, as its role would use it (the example), None
    when it has none."""
    found = []
    for name in sorted(values):
        if name in specs and problem(name, specs[name], values[name]):
            spec = specs[name]
            found.append(problem(name, spec, values[name], default_of(name) if default_of else None,
                                 first_sentence(spec.get('description'))))
    return found


def first_sentence(description):
    """The start of a spec's description, without ansible-doc's markup: what the setting is."""
    text = description[0] if isinstance(description, list) and description else description or ''
    text = ' '.join(str(text).split())
    for markup in ('C(', 'O(', 'V(', 'I(', 'M(', 'P(', 'RV('):
        while markup in text:
            start = text.index(markup)
            end = text.find(')', start)
            if end < 0:
                break
            text = text[:start] + text[start + len(markup):end] + text[end + 1:]
    cut = text.find('. ')
    text = text[:cut] if cut >= 0 else text.rstrip('.')
    return text if len(text) <= 160 else text[:157] + '...'
