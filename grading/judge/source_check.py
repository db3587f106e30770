"""A static check of a submission's source, before it is imported: `check_source(path)`.

The guards (grading/judge/guards.py) watch what a call does; some ways round them leave nothing to
watch: code that asks whether it is being graded (by its stack, its environment, the modules
loaded) and behaves only then, work handed to another thread, native code. None of these is
needed by any kata's solution, so the source may not contain them. Python's `ast` reads the file
without running it; each reason names the file and line.

The grader (grading/grade/cli.py) refuses a submission with any reason; a practice run
(`--impl`) prints the reasons as warnings after its tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grading.judge.impl import kata_names

# Modules a solution may import, with their submodules. The repository's own packages are there
# for the parts a kata builds on: `katas.<kata>.solution`, `reference.<kata>`, and the harness's
# shared pieces (the model, the naive server, where code runs) the READMEs point to.
ALLOWED_IMPORTS = frozenset(
    {
        "__future__", "abc", "bisect", "collections", "dataclasses", "enum", "functools",
        "heapq", "itertools", "math", "numbers", "operator", "typing", "torch", "triton",
        "katas", "reference", "grading.model", "grading.naive", "grading.devices",
    }
)  # fmt: skip
# Reached through an allowed module all the same: what the guards watch, or what watches them.
REFUSED_MODULES = frozenset(
    {
        "torch._C", "torch._dynamo", "torch.utils._python_dispatch", "torch.overrides",
        "torch.utils.dlpack", "torch.multiprocessing", "torch.utils.data", "torch.testing",
        "torch.distributed", "torch.cuda.nvtx", "torch.profiler", "torch.autograd.profiler",
        "triton.runtime.interpreter",
        # grading.model's tools beside the model, which no solution needs: checkpoints and
        # training read files, the baseline runs transformers.
        "grading.model.hf", "grading.model.train", "grading.model.baselines",
        "grading.model.workload", "grading.model.checkpoints", "grading.model.latency",
        # typing's evaluation of string annotations is `eval` by another name.
        "typing.get_type_hints", "typing.ForwardRef", "typing.evaluate_forward_ref",
    }
)  # fmt: skip
# The repository's packages, wherever a dotted path names them (`grading.model.llama`, or
# `grading.judge` reached as an attribute after `import grading.model`): of `grading` only the
# model, the naive server and devices; of `katas` only the solutions.
REPOSITORY_PACKAGES = frozenset({"grading", "katas", "reference"})
GRADING_FOR_SOLUTIONS = frozenset({"model", "naive", "devices"})
# Calls and names that inspect or rewrite code, read the environment or the stack, or escape.
REFUSED_NAMES = {
    "exec": "runs code made at run time",
    "eval": "runs code made at run time",
    "compile": "makes code at run time",
    "__import__": "imports by a name made at run time",
    "globals": "reads the module's namespace as data",
    "vars": "reads a namespace as data",
    "getattr": "reads an attribute by a name made at run time (a constant name is fine)",
    "setattr": "writes an attribute by a name made at run time (a constant name is fine)",
    "delattr": "deletes an attribute by a name made at run time (a constant name is fine)",
    "breakpoint": "stops the run",
}
# Attributes no solution reads: code objects, frames, the interpreter's innards, private parts
# of PyTorch, tensor data outside PyTorch.
REFUSED_ATTRIBUTES = {
    "__code__": "a function's code object",
    "__globals__": "a function's namespace",
    "__closure__": "a function's closure",
    "__defaults__": "a function's defaults",
    "__kwdefaults__": "a function's defaults",
    "__builtins__": "the builtins",
    "__dict__": "a namespace as data",
    "__subclasses__": "the class hierarchy",
    "__torch_function__": "PyTorch's override protocol",
    "__torch_dispatch__": "PyTorch's dispatch protocol",
    "_getframe": "the call stack",
    "f_back": "the call stack",
    "f_globals": "the call stack",
    "f_locals": "the call stack",
    "gi_frame": "the call stack",
    "tb_frame": "the call stack",
    "environ": "the environment",
    "getenv": "the environment",
    "modules": "the loaded modules",
    "_C": "PyTorch's private internals (e.g. torch._C.TensorBase.numpy, unwatched)",
    "_dynamo": "PyTorch's private internals",
    "untyped_storage": "a tensor's raw memory",
    "data_ptr": "a tensor's address",
    "numpy": "tensor data in NumPy",
    "__array__": "tensor data in NumPy",
    "__dlpack__": "tensor data through DLPack",
    "to_dlpack": "tensor data through DLPack",
    "_version": "a tensor's version counter (a memory keyed on it)",
    "__bases__": "the class hierarchy (e.g. torch._C.TensorBase, unwatched)",
    "__base__": "the class hierarchy (e.g. torch._C.TensorBase, unwatched)",
    "__mro__": "the class hierarchy (e.g. torch._C.TensorBase, unwatched)",
    "mro": "the class hierarchy (e.g. torch._C.TensorBase, unwatched)",
    "__annotations__": "annotations as data (evaluated, they are `eval`)",
    "judge": "the judge's package (grading.judge), whatever it is reached through",
    "grade": "the grader's package (grading.grade), whatever it is reached through",
}
# Attribute access by a name held in a string: allowed only with names written in the source
# that pass the same rules as `x.name` (`operator.attrgetter("_C._DisableTorchDispatch")`
# reaches anything otherwise).
BY_NAME_CALLS = frozenset({"attrgetter", "methodcaller"})
BY_NAME_METHODS = frozenset({"__getattribute__", "__getattr__", "__setattr__", "__delattr__"})
# Where a private name (`_x`, not `__x__`) may be read: on the object a method is given
# (`self`, `cls`) and on the classes and functions the submission defines.
OWN_RECEIVERS = frozenset({"self", "cls"})
# The one reading of the environment a solution may make: whether Triton runs on the CPU.
ALLOWED_ENVIRONMENT = "TRITON_INTERPRET"


def check_source(path: str | Path, kata: str | None = None) -> list[str]:
    """What the file at `path` may not contain, one reason per line found (empty: none).
    `kata`: the kata the file solves, whose reference it may not import."""
    path = Path(path)
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        return [f"{path}: cannot be read as Python ({type(exc).__name__}: {exc})"]
    found = []
    calls = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    own = OWN_RECEIVERS | {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    imported = _import_bindings(tree)
    inner = _inner_of_chains(tree)
    for node in ast.walk(tree):
        why = (
            _refused(node, tree, calls, own)
            or _own_reference(node, kata)
            or _path_refused(node, imported, inner, kata)
            or _annotation_refused(node, tree, imported, kata)
        )
        if why:
            found.append((getattr(node, "lineno", 0), why))
    return [f"{path.name}:{line}: {why}" for line, why in sorted(set(found))]


def _import_bindings(tree: ast.Module) -> dict[str, str]:
    """The names the file's imports bind, with the dotted path each stands for: `import a.b`
    binds a -> a, `import a.b as x` x -> a.b, `from a import b` b -> a.b."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.Attribute) -> tuple[str, list[str]] | None:
    """`a.b.c` -> ("a", ["b", "c"]); None when the chain does not start at a plain name."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return (node.id, attrs[::-1]) if isinstance(node, ast.Name) else None


def _inner_of_chains(tree: ast.AST) -> set[int]:
    """The ids of the nodes an attribute is read from (`a` and `a.b` in `a.b.c`)."""
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def _path_refused(node: ast.AST, imported: dict, inner: set, kata: str | None) -> str | None:
    """An attribute chain read from a module (`grading.judge` after `import grading.model`,
    `torch.overrides.TorchFunctionMode`, `reference.kv_cache` reached through another reference),
    or a repository package used as a value (`g = grading`). A chain is checked once, whole, at
    its outermost attribute."""
    if isinstance(node, ast.Name) and imported.get(node.id) in REPOSITORY_PACKAGES:
        if id(node) not in inner and not isinstance(node.ctx, ast.Store):
            return f"uses the package `{node.id}` as a value; name the module you need in an import"
        return None
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        names = []
    for name in names:
        if why := _repository_path_refused(name.split("."), kata):
            return why
    if not isinstance(node, ast.Attribute) or id(node) in inner:
        return None
    chain = _dotted(node)
    if chain is None:
        return None
    root, attrs = chain
    segments = (imported[root].split(".") if root in imported else [root]) + attrs
    paths = [segments[i:] for i, part in enumerate(segments) if part in REPOSITORY_PACKAGES]
    if root in imported:
        paths.append(segments)
    for path in paths:
        why = _repository_path_refused(path, kata)
        if why:
            return why
    return None


def _repository_path_refused(path: list[str], kata: str | None) -> str | None:
    name = ".".join(path)
    prefixes = {".".join(path[: i + 1]) for i in range(len(path))}
    refused = sorted(prefixes & REFUSED_MODULES)
    if refused:
        reached = f"`{name}`" if name == refused[0] else f"`{name}` reaches `{refused[0]}`, which"
        return f"{reached} is not on the list of allowed modules{REFUSED_WHY}"
    top, second, third = (path + [None, None])[:3]
    if top == "grading" and second and second not in GRADING_FOR_SOLUTIONS:
        return (
            f"`{name}` reaches `grading.{second}`: of grading/, a solution may use only the "
            "model, the naive server and devices, whatever it reaches them through"
        )
    if (
        top == "katas"
        and second
        and (second not in kata_names() or third not in (None, "solution"))
    ):
        return (
            f"`{name}` reaches `{'.'.join(path[:3])}`: of katas/, a solution may use only the "
            "katas' `solution` modules (the tests and their kit judge it)"
        )
    if top == "reference" and kata and second == kata:
        return (
            f"`{name}` reaches `reference.{kata}`, this kata's own reference, which is not there "
            "while grading; the kata's file must do the work itself"
        )
    return None


def _annotation_refused(node: ast.AST, tree: ast.Module, imported: dict, kata) -> str | None:
    """An annotation written as a string is code that typing may evaluate: it follows the rules
    of the code around it."""
    if isinstance(node, (ast.arg, ast.AnnAssign)):
        notes = [node.annotation]
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        notes = [node.returns]
    else:
        return None
    for note in notes:
        if isinstance(note, ast.Constant) and isinstance(note.value, str):
            try:
                inner = ast.parse(note.value, mode="eval")
            except SyntaxError:
                return f"the annotation {note.value!r} is not an expression"
            calls = {id(n.func): n for n in ast.walk(inner) if isinstance(n, ast.Call)}
            chains = _inner_of_chains(inner)
            for sub in ast.walk(inner):
                why = _refused(sub, tree, calls, set()) or _path_refused(
                    sub, imported, chains, kata
                )
                if why or isinstance(sub, ast.Call):
                    return f"the annotation {note.value!r}: {why or 'calls a function'}"
    return None


def _own_reference(node: ast.AST, kata: str | None) -> str | None:
    """`import reference.<kata>` or `from reference import <kata>` in that kata's own file."""
    own = f"reference.{kata}"
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    else:
        return None
    if kata and any(name == own or name.startswith(own + ".") for name in names):
        return (
            f"imports `{own}`, this kata's own reference, which is not there while grading; "
            "the kata's file must do the work itself"
        )
    return None


def _module_allowed(name: str) -> bool:
    parts = name.split(".")
    prefixes = {".".join(parts[: i + 1]) for i in range(len(parts))}
    private = any(_private(part) for part in parts) and name != "__future__"
    return bool(prefixes & ALLOWED_IMPORTS) and not prefixes & REFUSED_MODULES and not private


def _private(name: str) -> bool:
    """`_x` or `__x`: a name its module keeps to itself (`__x__` is Python's, not private)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _name_refused(name: str, receiver: ast.expr | None, own: frozenset | set) -> str | None:
    """Why reading attribute `name` of `receiver` (None: of something unknown) is refused."""
    if name in REFUSED_ATTRIBUTES:
        return f"`.{name}` reads {REFUSED_ATTRIBUTES[name]}"
    if name in BY_NAME_METHODS:
        return f"`.{name}` reads attributes by a name made at run time"
    if _private(name) and not (isinstance(receiver, ast.Name) and receiver.id in own):
        return (
            f"`.{name}` reads a private attribute of something the submission did not define "
            "(PyTorch's or the judge's internals); private names only on self, cls and the "
            "submission's own classes and functions"
        )
    return None


def _by_name(node: ast.AST) -> bool:
    """`attrgetter`, `operator.methodcaller`, `x.__getattribute__`: an attribute read by name."""
    if isinstance(node, ast.Name):
        return node.id in BY_NAME_CALLS
    return isinstance(node, ast.Attribute) and node.attr in BY_NAME_CALLS | BY_NAME_METHODS


def _by_name_call_refused(node: ast.expr, calls: dict, own: set) -> str | None:
    """`operator.attrgetter(...)` / `methodcaller(...)`, or `x.__getattribute__(...)`: each
    dotted name given must be a constant that passes `_name_refused`."""
    call = calls.get(id(node))
    what = node.attr if isinstance(node, ast.Attribute) else node.id
    made = f"`{what}` reads attributes by a name made at run time; call it with a constant"
    if call is None:
        return made
    if what == "attrgetter":
        given = [(arg, None) for arg in call.args]
    elif what == "methodcaller":
        given = [(arg, None) for arg in call.args[:1]]
    elif len(call.args) >= 2 and isinstance(call.args[1], ast.Constant):
        given = [(call.args[1], call.args[0])]  # object.__getattribute__(x, "name")
    else:
        given = [(arg, node.value) for arg in call.args[:1]]  # x.__getattribute__("name")
    if not given:
        return made
    for arg, receiver in given:
        if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
            return made
        for i, part in enumerate(arg.value.split(".")):
            why = _name_refused(part, receiver if i == 0 else None, own)
            if why:
                return f"`{what}({arg.value!r})`: {why}"
    return None


def _refused(node: ast.AST, tree: ast.Module, calls: dict, own: set) -> str | None:
    """Why `node` may not be in a solution, or None."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if not _module_allowed(alias.name) and not _environment_import(alias, tree):
                return _import_reason(alias.name)
    elif isinstance(node, ast.ImportFrom):
        if node.level == 0 and not _module_allowed(node.module or ""):
            return _import_reason(node.module or "")
        for alias in node.names:
            if node.level == 0 and f"{node.module}.{alias.name}" in REFUSED_MODULES:
                return _import_reason(f"{node.module}.{alias.name}")
            if _private(alias.name):
                return _import_reason(f"{node.module}.{alias.name}")
            if alias.name in BY_NAME_CALLS and alias.asname not in (None, alias.name):
                return f"imports `{alias.name}` under another name; use it by its own name"
    elif isinstance(node, ast.Name) and node.id in REFUSED_NAMES:
        if _constant_attribute(calls.get(id(node)), own):
            return None
        return f"`{node.id}` {REFUSED_NAMES[node.id]}; no solution needs it"
    elif _by_name(node):
        return _by_name_call_refused(node, calls, own)
    elif isinstance(node, ast.Attribute) and node.attr in REFUSED_ATTRIBUTES:
        if not _reads_triton_interpret(node, tree):
            return f"`.{node.attr}` reads {REFUSED_ATTRIBUTES[node.attr]}; no solution needs it"
    elif isinstance(node, ast.Attribute) and (why := _name_refused(node.attr, node.value, own)):
        return f"{why}; no solution needs it"
    elif isinstance(node, ast.ClassDef):
        for base in node.bases:
            if _names_tensor(base):
                return (
                    f"class {node.name} subclasses a tensor; results must be plain tensors and "
                    "a subclass changes how PyTorch (and the tests) treat them"
                )
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name in (
                "__torch_function__",
                "__torch_dispatch__",
            ):
                return (
                    f"{node.name}.{item.name} takes over PyTorch's operators; no solution needs it"
                )
    return None


def _constant_attribute(call: ast.Call | None, own: set) -> bool:
    """getattr(x, "name"), setattr(x, "name", v): a name written in the source that passes the
    rules of `x.name` (getattr(f, "__code__") is as refused as f.__code__)."""
    if call is None or not isinstance(call.func, ast.Name):
        return False
    if call.func.id not in ("getattr", "setattr", "delattr") or len(call.args) < 2:
        return False
    name = call.args[1]
    return (
        isinstance(name, ast.Constant)
        and isinstance(name.value, str)
        and _name_refused(name.value, call.args[0], own) is None
    )


REFUSED_WHY = (
    ' (grading/README.md, "The source check"): threads, processes, native code, the stack or the '
    "environment are not needed by any kata"
)


def _import_reason(name: str) -> str:
    return f"imports `{name}`, which is not on the list of allowed modules{REFUSED_WHY}"


def _names_tensor(base: ast.expr) -> bool:
    return (isinstance(base, ast.Attribute) and base.attr in ("Tensor", "TensorBase")) or (
        isinstance(base, ast.Name) and base.id in ("Tensor", "TensorBase")
    )


def _environment_import(alias: ast.alias, tree: ast.Module) -> bool:
    """`import os` used only to read TRITON_INTERPRET (as the FlashAttention kata's CPU check
    does): every use of the name is `os.environ.get("TRITON_INTERPRET")` or `os.getenv(...)`."""
    if alias.name != "os":
        return False
    name = alias.asname or "os"
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _is_name(n.value, name)]
    return (
        bool(uses)
        and all(_reads_triton_interpret(n, tree) for n in uses)
        and not any(
            isinstance(n, ast.Name) and n.id == name and not _inside_attribute(n, tree)
            for n in ast.walk(tree)
        )
    )


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _inside_attribute(name: ast.Name, tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Attribute) and n.value is name for n in ast.walk(tree))


def _reads_triton_interpret(node: ast.Attribute, tree: ast.Module) -> bool:
    """`os.environ.get("TRITON_INTERPRET"...)`, `os.environ["TRITON_INTERPRET"]` or
    `os.getenv("TRITON_INTERPRET"...)`, with `node` the `os.<attr>` or `os.environ.get` part."""
    for parent in ast.walk(tree):
        if isinstance(parent, ast.Call) and _first_is_triton(parent.args):
            f = parent.func
            chain = [f, getattr(f, "value", None)]
            if node in chain and isinstance(f, ast.Attribute) and f.attr in ("get", "getenv"):
                return True
        if (
            isinstance(parent, ast.Subscript)
            and parent.value is node
            and isinstance(parent.slice, ast.Constant)
            and parent.slice.value == ALLOWED_ENVIRONMENT
        ):
            return True
    return False


def _first_is_triton(args: list) -> bool:
    return bool(args) and isinstance(args[0], ast.Constant) and args[0].value == ALLOWED_ENVIRONMENT
