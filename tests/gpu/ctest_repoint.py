#!/usr/bin/env python3
"""Re-points this build's gpu-labelled CTest tests at the packed binaries and data on the GPU
machine (tests/gpu/device_run.sh's ctest stage). Usage: ctest_repoint.py HERE DEST

HERE is the copy of the repository there (with .gpu/ unpacked); DEST gets a CTestTestfile.cmake
whose tests run .gpu/.dev/bin's binaries, read the packed ONNX test data, and name this copy of
the tree wherever the build machine's source path was compiled into a command or environment."""
import json, os, sys
here, dest = sys.argv[1:3]
os.makedirs(dest, exist_ok=True)
tests = json.load(open(os.path.join(here, ".gpu/gpu_ctest.json")))["tests"]
src_file = os.path.join(here, ".gpu/source_dir.txt")
src = open(src_file).read().strip() if os.path.exists(src_file) else None
def where(arg):  # a path on the build machine -> the packed copy here
    for old, new in (("/usr/bin/python3", sys.executable),):
        if arg == old:
            return new
    i = arg.find("/build/bin/")
    if i >= 0:
        return os.path.join(here, ".gpu/.dev/bin", arg[i + len("/build/bin/"):])
    if src and (arg == src or arg.startswith(src + "/")):
        return here + arg[len(src):]  # the source tree the bundle was packed from -> this copy
    return arg
def q(s):  # a CMake quoted argument; a ";" in it separates list items (ENVIRONMENT, ...)
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
lines = []
for t in tests:
    cmd = [where(a) for a in t["command"]]
    if cmd[0].endswith("dp_equivalence.sh"):
        cmd.append(os.path.join(here, ".gpu/fashion-mnist"))
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = [e for e in props.get("ENVIRONMENT", []) if not e.startswith("HGPC_BUILD=")]
    env = [e.split("=", 1)[0] + "=" + where(e.split("=", 1)[1]) if "=" in e else e for e in env]
    env += ["HGPC_BUILD=" + os.path.join(here, ".gpu/.dev"),
            "HGP_ONNX_TESTDATA=" + os.path.join(here, ".gpu/testdata"), "HGP_SOURCE_DIR=" + here]
    lines.append("add_test(%s %s)" % (q(t["name"]), " ".join(q(c) for c in cmd)))
    out = {"LABELS": "gpu", "ENVIRONMENT": ";".join(env), "WORKING_DIRECTORY": dest,
           "TIMEOUT": str(props.get("TIMEOUT", 600))}
    for k in ("SKIP_RETURN_CODE",):
        if k in props:
            out[k] = str(props[k])
    if "SKIP_REGULAR_EXPRESSION" in props:
        out["SKIP_REGULAR_EXPRESSION"] = ";".join(props["SKIP_REGULAR_EXPRESSION"])
    lines.append("set_tests_properties(%s PROPERTIES %s)" % (
        q(t["name"]), " ".join("%s %s" % (k, q(v)) for k, v in out.items())))
open(os.path.join(dest, "CTestTestfile.cmake"), "w").write("\n".join(lines) + "\n")
print("ctest: %d gpu-labelled tests" % len(tests))
