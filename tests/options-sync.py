#!/usr/bin/env python3
"""For every command: the long options in `vmtrace CMD --help-all`, in the
option lists of doc/vmtrace-CMD.1 (the line after each .TP, outside EXIT STATUS,
EXAMPLES and SEE ALSO) and in the
bash completion must be the same set.  Prints one line per difference and
exits 1 if there is any.  Usage: options-sync.py VMTRACE TOP_SRCDIR CMD..."""
import re, subprocess, sys

vmtrace, top, cmds = sys.argv[1], sys.argv[2], sys.argv[3:]
IGNORE = {"--help", "--help-all"}

def help_options(args):
    out = subprocess.run([vmtrace] + args + ["--help-all"], capture_output=True, text=True).stdout
    opts = set()
    for line in out.splitlines():
        m = re.match(r"\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", line)
        if m and not m.group(1).startswith("--help-"):
            opts.add(m.group(1))
    return {o for o in opts if not o.startswith("--help-")} - IGNORE

def man_options(cmd):
    text = open("%s/doc/vmtrace-%s.1" % (top, cmd)).read()
    opts = set()
    for sec in re.findall(r"^\.SH ((?!EXIT|EXAMPLES|SEE ALSO)[A-Z ]+)\n(.*?)(?=^\.SH |\Z)", text, re.S | re.M):
        lines = sec[1].splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.strip() == ".TP":
                opts |= set(o.replace("\\-", "-") for o in re.findall(r"\\-\\-[a-z][a-z0-9\\-]*", lines[i + 1]))
    return {re.sub(r"-$", "", o) for o in opts} - IGNORE

def completion_options(cmd, sub=None):
    text = open("%s/scripts/completion/vmtrace" % top).read()
    block = re.search(r"^\t%s\)\n(.*?)(?=^\t[a-z]+\)\n|^\tesac)" % cmd, text, re.S | re.M).group(1)
    opts = set()
    block = re.sub(r"\$\(virsh[^)]*\)", "", block)
    for words in re.findall(r'compgen -W "([^"]*)"', block):
        if sub == "check":
            words = re.sub(r"\$\(\[.*?\)", "", words)   # fetch-only words
        opts |= {w.rstrip("=") for w in words.split() if w.startswith("--")}
    if sub == "fetch":
        for words in re.findall(r'echo "([^"]*)"', block):
            opts |= {w.rstrip("=") for w in words.split() if w.startswith("--")}
    return {o for o in opts if not o.startswith("--help-")} - IGNORE

bad = 0
def same(what, a, b, an, bn):
    global bad
    for o in sorted(a - b):
        print("%s: %s is in %s but not in %s" % (what, o, an, bn)); bad = 1
    for o in sorted(b - a):
        print("%s: %s is in %s but not in %s" % (what, o, bn, an)); bad = 1

for cmd in cmds:
    if cmd == "guest":
        h = {s: help_options(["guest", s]) for s in ("fetch", "check")}
        same("guest", h["fetch"] | h["check"], man_options("guest"), "--help", "vmtrace-guest(1)")
        for s in ("fetch", "check"):
            same("guest " + s, h[s], completion_options("guest", s), "--help", "the completion")
    else:
        h = help_options([cmd])
        same(cmd, h, man_options(cmd), "--help", "vmtrace-%s(1)" % cmd)
        same(cmd, h, completion_options(cmd), "--help", "the completion")
sys.exit(bad)
