#!/usr/bin/env python3
"""Writes a call of every function accelerate.h declares, with arguments of each kind of mistake.

Usage: generate_calls.py HEADER OUTPUT. The output is C++ included by every_function.cpp: a table of
{name, returns a status, takes a handle, calls[variant]}. The variants (see every_function.cpp):
  null      every pointer NULL, numbers 0
  negative  live handles, out-parameters given, "" strings, NULL arrays, -1 / SIZE_MAX / NaN / enum -1
  large     live handles, odd strings, arrays of extreme values, INT64_MAX / 2 / 1e308 / enum 12345
  foreign   handles that point at bytes the library never made, the other values extreme
  freed     handles already freed, the other values ordinary
"""
import re
import sys

HANDLES = {"accelerator", "model", "optimizer", "scheduler", "dataset", "dataloader", "tensor", "tensor_list",
           "options", "progress", "string_list", "averaged_model"}
VARIANTS = ["null", "negative", "large", "foreign", "freed"]
NUMBERS = {
    "int64_t": ["0", "-1", "INT64_MAX", "INT64_MIN", "1"],
    "size_t": ["0", "SIZE_MAX", "2", "SIZE_MAX / 2", "1"],
    "uint64_t": ["0", "UINT64_MAX", "uint64_t{1} << 63", "7", "1"],
    "uint32_t": ["0", "UINT32_MAX", "1u << 31", "7", "1"],
    "int": ["0", "-1", "INT_MAX", "INT_MIN", "1"],
    "double": ["0", "NAN", "1e308", "-INFINITY", "-1"],
}
STRINGS = ["nullptr", '""', 'kOddText', '"x"', '"linear"']


def prototypes(header):
    text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
    for body in re.findall(r"\nACC_API\s+(.*?);", text, flags=re.S):
        body = " ".join(body.split()).replace("ACC_NODISCARD ", "")
        m = re.match(r"(.*?)\b(acc_\w+)\s*\((.*)\)$", body)
        if not m:
            sys.exit(f"generate_calls.py: cannot read the declaration '{body}'")
        args = m.group(3).strip()
        params = [] if args in ("", "void") else [a.strip() for a in re.split(r",(?![^()]*\))", args)]
        yield m.group(1).strip(), m.group(2), params


def param_type(param):
    if "(" in param:
        return "callback"
    return re.sub(r"\b\w+$", "", param).strip()


def handle_kind(t):
    m = re.fullmatch(r"(?:const )?acc_(\w+) \*", t)
    return m.group(1) if m and m.group(1) in HANDLES else None


def argument(t, v, slot):
    """The argument of type t in variant v (an index into VARIANTS); slot: the parameter's position."""
    kind = handle_kind(t)
    if kind:
        return ["nullptr", f"live.{kind}", f"live.{kind}", f"reinterpret_cast<acc_{kind}*>(foreign)",
                f"live.freed_{kind}"][v]
    # Handles live only inside a callback: NULL or foreign bytes.
    m = re.fullmatch(r"(?:const )?(acc_bytes|acc_checkpoint_models) \*", t)
    if m:
        return "nullptr" if v == 0 else f"reinterpret_cast<{m.group(1)}*>(foreign)"
    if t == "callback" or t.endswith("_fn") or t == "acc_deleter":
        return "nullptr"
    if re.fullmatch(r"acc_\w+ \*\*|char \*\*|const char \*\*|const void \*\*", t):  # out-parameters
        return "nullptr" if v == 0 else f"static_cast<{t}>(static_cast<void*>(&out_slots[{slot}]))"
    if t in ("int64_t *", "uint64_t *", "double *", "size_t *", "int *", "acc_dtype *"):
        return "nullptr" if v == 0 else f"static_cast<{t}>(static_cast<void*>(&out_bytes[{slot * 16}]))"
    if t == "const acc_tensor *const *":
        return ["nullptr", "nullptr", "live.tensors", "foreign_tensors", "live.freed_tensors"][v]
    if t in ("const int64_t *", "const size_t *", "const double *", "const void *", "void *"):
        return "nullptr" if v < 2 else f"reinterpret_cast<{t}>(extreme_values)"
    if t == "const char *":
        return STRINGS[v]
    if t == "char *":
        return "nullptr" if v == 0 else "reinterpret_cast<char*>(foreign)"
    if t == "const char *const *":
        return "nullptr" if v == 0 else "odd_strings"
    if t in NUMBERS:
        return NUMBERS[t][v]
    if re.fullmatch(r"acc_\w+", t):  # an enum
        return f"static_cast<{t}>({['0', '-1', '12345', 'INT_MIN', '1'][v]})"
    sys.exit(f"generate_calls.py: no arguments for the type '{t}'")


def main():
    header, output = sys.argv[1], sys.argv[2]
    rows = []
    for ret, name, params in prototypes(header):
        types = [param_type(p) for p in params]
        calls = []
        for v in range(len(VARIANTS)):
            call = f"{name}({', '.join(argument(t, v, i) for i, t in enumerate(types))})"
            calls.append(f"[](Live& live) {{ (void)live; return static_cast<int>({call}); }}" if ret == "acc_status"
                         else f"[](Live& live) {{ (void)live; (void){call}; return kNoStatus; }}")
        takes_handle = any(handle_kind(t) for t in types)
        joined = ",\n    ".join(calls)
        rows.append(f'  {{"{name}", {str(ret == "acc_status").lower()}, {str(takes_handle).lower()},\n'
                    f'   {{{joined}}}}},')
    if len(rows) < 100:
        sys.exit(f"generate_calls.py: only {len(rows)} functions found in {header}")
    with open(output, "w") as out:
        out.write("// Generated by generate_calls.py from accelerate.h: do not edit.\n")
        out.write("const Function kFunctions[] = {\n" + "\n".join(rows) + "\n};\n")


if __name__ == "__main__":
    main()
