"""Dumps the argparse parser that Megatron-LM's add_megatron_arguments builds, as JSON.

usage: /usr/bin/python3 tools/megatron_flags/dump_megatron_flags.py MEGATRON_LM_DIR OUT.json

MEGATRON_LM_DIR is a checkout (or `git archive`) of Megatron-LM holding megatron/; for
api/args/testdata/megatron_core_v0.19.0_flags.json it was tag core_v0.19.0:

  git -C Megatron-LM archive core_v0.19.0 megatron | tar -x -C /tmp/mlm19
  /usr/bin/python3 tools/megatron_flags/dump_megatron_flags.py /tmp/mlm19 \
      api/args/testdata/megatron_core_v0.19.0_flags.json

Megatron's parser is built from megatron/training/arguments.py and the config dataclasses
(TransformerConfig, TrainingConfig, LoggerConfig, ...) that its ArgumentGroupFactory turns
into flags, so the only faithful list of 0.19's flags is the parser itself. Importing
arguments.py pulls in most of Megatron-Core; the packages it needs and this machine lacks
(torch, transformer_engine, pydantic, ...; Megatron's RL package) are replaced by inert
stand-ins that only let the modules load. Building the parser runs no code of theirs:
every flag's option strings, dest, action, nargs, type, default and choices come from
Megatron's own add_argument calls. The flags pretrain_gpt.py adds when NVIDIA Model
Optimizer is installed (megatron/post_training/arguments.py add_modelopt_args) come last,
marked "added_by": "add_modelopt_args". Written for MXMACA's flag table
(api/args/flag_table.h); //api/args:flag_table_pin_test reads the output.
"""
import argparse
import importlib.abc
import importlib.machinery
import json
import os
import re
import sys
import types
import typing

# ---- stand-ins for packages this machine does not have ----
# _Dummy: any attribute, call, item, iteration or comparison of a missing package (falsy;
# usable as a base class and in `X | None` annotations). StubModule: a missing module whose
# attributes are _Dummy. Finder: serves StubModule for torch, transformer_engine, apex,
# triton, Megatron's RL package and any other top-level package that cannot be found.

_META_CACHE = {}

class _Dummy:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Dummy()
    def __getattr__(self, n):
        if n.startswith('__'): raise AttributeError(n)
        return _Dummy()
    def __iter__(self): return iter(())
    def __bool__(self): return False
    def __or__(self, o): return self
    __ror__ = __or__
    def __getitem__(self, k): return _Dummy()
    def __lt__(self, o): return False
    __le__ = __gt__ = __ge__ = __lt__
    def __eq__(self, o): return self is o
    def __hash__(self): return id(self)
    def __mro_entries__(self, bases):
        import abc
        metas = [type(b) for b in bases if not isinstance(b, _Dummy)] + [abc.ABCMeta]
        base_meta = max(metas, key=lambda m: len(m.__mro__))
        if base_meta in _META_CACHE: return (_META_CACHE[base_meta],)
        class _Meta(base_meta):
            def __getattr__(cls, n):
                if n.startswith('__'): raise AttributeError(n)
                return _Dummy()
        class _Base(metaclass=_Meta):
            def __init_subclass__(cls, **kw): super().__init_subclass__()
            def __init__(self, *a, **k): pass
            def __getattr__(self, n):
                if n.startswith('__'): raise AttributeError(n)
                return _Dummy()
        _META_CACHE[base_meta] = _Base
        return (_Base,)

class StubModule(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name == '__version__': return '99.0.0'
        if name.startswith('__'): raise AttributeError(name)
        return _Dummy()

FORCE = {'torch', 'transformer_engine', 'apex', 'triton'}

FORCE_PREFIX = {'megatron.rl', 'numpy.dtypes'}

class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        top = name.split('.')[0]
        if top in sys.stdlib_module_names or top.startswith('_'): return None
        if top in FORCE or any(name == p or name.startswith(p + '.') for p in FORCE_PREFIX): return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if top == 'megatron' and not any(name == p or name.startswith(p + '.') for p in FORCE_PREFIX): return None
        if '.' in name and top != 'megatron':
            parent = sys.modules.get(top)
            if parent is not None and not isinstance(parent, StubModule): return None
        for f in sys.meta_path:
            if f is self: continue
            try:
                spec = f.find_spec(name, path, target)
            except Exception:
                spec = None
            if spec is not None: return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)
    def create_module(self, spec): return StubModule(spec.name)
    def exec_module(self, m): pass


# packaging.version (Megatron compares package versions with it): a minimal Version.
def _install_packaging():
    try:
        import packaging.version  # noqa: F401
        return
    except ImportError:
        pass
    ns = {}
    exec(compile(_PACKAGING_VERSION, 'packaging/version.py', 'exec'), ns)
    pkg = types.ModuleType('packaging')
    pkg.__path__ = []
    version = types.ModuleType('packaging.version')
    version.__dict__.update({k: v for k, v in ns.items() if not k.startswith('__')})
    pkg.version = version
    sys.modules['packaging'] = pkg
    sys.modules['packaging.version'] = version


_PACKAGING_VERSION = r'''
import re
class InvalidVersion(ValueError): pass
class Version:
    def __init__(self, s):
        self.s = str(s)
        self.t = tuple(int(x) for x in re.findall(r'\d+', self.s)[:3])
        self.major = self.t[0] if self.t else 0
        self.minor = self.t[1] if len(self.t) > 1 else 0
        self.micro = self.t[2] if len(self.t) > 2 else 0
        self.base_version = '.'.join(map(str, self.t))
        self.release = self.t
    def __lt__(self, o): return self.t < Version(o).t if not isinstance(o, Version) else self.t < o.t
    def __le__(self, o): return not o < self if isinstance(o, Version) else self.t <= Version(o).t
    def __gt__(self, o): return (o if isinstance(o, Version) else Version(o)) < self
    def __ge__(self, o): return not self < o
    def __eq__(self, o): return self.t == (o if isinstance(o, Version) else Version(o)).t
    def __hash__(self): return hash(self.t)
    def __str__(self): return self.s
def parse(s): return Version(s)
'''


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, out_path = sys.argv[1], sys.argv[2]
    if not os.path.isdir(os.path.join(root, 'megatron', 'training')):
        sys.exit(f'{root}: no megatron/training/ here (expected a Megatron-LM checkout)')
    _install_packaging()
    sys.meta_path.insert(0, Finder())
    if not hasattr(typing, 'override'):  # Python < 3.12
        typing.override = lambda f: f
    sys.path.insert(0, root)
    sys.argv = ['pretrain_gpt.py']
    import megatron.training.arguments as arguments

    parser = argparse.ArgumentParser(description='Megatron-LM Arguments', allow_abbrev=False)
    parser = arguments.add_megatron_arguments(parser)
    n_megatron = len(parser._actions)
    # pretrain_gpt.py's extra_args_provider when NVIDIA Model Optimizer is installed.
    from megatron.post_training.arguments import add_modelopt_args
    parser = add_modelopt_args(parser)
    group_of = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            group_of[id(action)] = group.title
    rows = []
    for index, action in enumerate(parser._actions):
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action.default, _Dummy):
            sys.exit(f'{action.option_strings}: its default comes from a stand-in package')
        rows.append({
            'options': action.option_strings,
            'dest': action.dest,
            'action': type(action).__name__,
            'nargs': action.nargs,
            'type': None if action.type is None else getattr(action.type, '__name__', repr(action.type)),
            'default': repr(action.default),
            'choices': None if action.choices is None else [repr(c) for c in action.choices],
            'group': group_of.get(id(action)),
        })
        if index >= n_megatron:
            rows[-1]['added_by'] = 'add_modelopt_args'
    with open(out_path, 'w') as f:  # one flag per line
        f.write('[\n' + ',\n'.join(json.dumps(row) for row in rows) + '\n]\n')
    print(f'{out_path}: {len(rows)} flags')


if __name__ == '__main__':
    main()
