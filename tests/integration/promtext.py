"""A strict parser of the Prometheus text exposition format, version 0.0.4.

What node_exporter's textfile collector (and Prometheus) read from `topocni node-report
--format prometheus`. Where the format says a thing is undefined or must not happen, this
parser refuses it with a ValueError that names the line (number and text):

- a line ends with a line feed, the last one too; empty lines are ignored;
- tokens are separated by blanks and/or tabs; leading and trailing blanks are ignored;
- metric names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*, each
  label at most once per sample;
- label values are double-quoted; only \\\\, \\" and \\n are escapes; HELP text has only
  \\\\ and \\n;
- a value is a Go float (decimal or scientific, +Inf, -Inf, Inf, NaN in any case), the
  optional timestamp an int64;
- `# HELP name text` and `# TYPE name counter|gauge|histogram|summary|untyped`: at most one
  of each per family, before the family's first sample; every other `#` line is a comment;
- the lines of a family (HELP, TYPE, samples) form one uninterrupted group;
- no two samples have the same name and label set;
- the samples of a counter family `x` are named `x` or `x_total`, and are not negative;
  a histogram `x` has `x_bucket`, `x_sum`, `x_count`; a summary `x` has `x`, `x_sum`,
  `x_count`; any other family has samples of its own name only. A sample no TYPE or HELP
  line claims is a family of its own, untyped.

    families = parse(text)                  # {family name: Family}
    value(families, "topocni_vfs_free", pf="ens1f0")
"""
import re
from dataclasses import dataclass, field

__all__ = ["Family", "Sample", "parse", "value", "TYPES"]

TYPES = ("counter", "gauge", "histogram", "summary", "untyped")

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# What Go's strconv.ParseFloat reads in decimal (no hex floats, no underscores).
FLOAT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])")
INT64 = re.compile(r"[+-]?[0-9]+")
BLANKS = " \t"
SUFFIXES = {
    "counter": ("", "_total"),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}


@dataclass
class Sample:
    name: str
    labels: dict
    value: float
    timestamp: int = None


@dataclass
class Family:
    name: str
    type: str = "untyped"
    help: str = None
    samples: list = field(default_factory=list)


def _names_of(name, type_):
    """The sample names a family of this name and type owns."""
    return {name + s for s in SUFFIXES.get(type_, ("",))}


class _Parser:
    def __init__(self, text):
        self.text = text
        self.families = {}
        self.declared = {}       # family name -> its TYPE (also "untyped" for HELP only)
        self.typed = set()       # families with a TYPE line
        self.helped = set()      # families with a HELP line
        self.closed = set()      # families whose group ended: no more lines of theirs
        self.current = None      # the family of the last HELP, TYPE or sample line
        self.series = {}         # (sample name, labels) -> line number
        self.lineno = 0
        self.line = ""

    def fail(self, why):
        raise ValueError(f"line {self.lineno}: {why}: {self.line!r}")

    def enter(self, family):
        """A line of `family`: it must not come back to a group that already ended."""
        if family != self.current:
            if family in self.closed:
                self.fail(f"the lines of {family} are not one group (another family came in between)")
            if self.current is not None:
                self.closed.add(self.current)
            self.current = family

    def family(self, name):
        if name not in self.families:
            self.families[name] = Family(name)
        return self.families[name]

    def owner(self, sample_name):
        """The family a sample name belongs to: the declared family that owns it, or its own."""
        owners = [f for f, t in self.declared.items() if sample_name in _names_of(f, t)]
        if len(owners) > 1:
            self.fail(f"sample {sample_name} belongs to more than one family ({', '.join(sorted(owners))})")
        return owners[0] if owners else sample_name

    def run(self):
        if self.text and not self.text.endswith("\n"):
            self.lineno = self.text.count("\n") + 1
            self.line = self.text.rsplit("\n", 1)[-1]
            self.fail("the last line does not end with a line feed")
        for self.lineno, self.line in enumerate(self.text.split("\n")[:-1], 1):
            body = self.line.strip(BLANKS)
            if not body:
                continue
            if body.startswith("#"):
                self.comment(body[1:].lstrip(BLANKS))
            else:
                self.sample(body)
        return self.families

    # -- # HELP, # TYPE and comments ------------------------------------------------------

    def comment(self, rest):
        keyword, _, rest = _split_token(rest)
        if keyword not in ("HELP", "TYPE"):
            return
        name, _, rest = _split_token(rest)
        if not name:
            self.fail(f"{keyword} without a metric name")
        if not METRIC_NAME.fullmatch(name):
            self.fail(f"{keyword}: invalid metric name {name!r}")
        if keyword == "HELP":
            if name in self.helped:
                self.fail(f"a second HELP for {name}")
            self.check_before_samples(name, "HELP", _names_of(name, self.declared.get(name, "untyped")))
            self.enter(name)
            self.helped.add(name)
            self.declared.setdefault(name, "untyped")
            self.family(name).help = self.unescape_help(rest)
            return
        type_, _, extra = _split_token(rest)
        if extra:
            self.fail("TYPE takes exactly a metric name and a type")
        if type_ not in TYPES:
            self.fail(f"TYPE {name}: unknown type {type_!r} (one of {', '.join(TYPES)})")
        if name in self.typed:
            self.fail(f"a second TYPE for {name}")
        self.check_before_samples(name, "TYPE", _names_of(name, type_))
        for other, t in self.declared.items():
            if other != name and _names_of(other, t) & _names_of(name, type_):
                self.fail(f"TYPE {name} {type_} claims sample names of family {other} ({t})")
        self.enter(name)
        self.typed.add(name)
        self.declared[name] = type_
        self.family(name).type = type_

    def check_before_samples(self, name, keyword, names):
        seen = sorted({s for s, _ in self.series} & names)
        if seen:
            self.fail(f"{keyword} for {name} after its samples ({', '.join(seen)})")

    def unescape_help(self, text):
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt == "\\":
                    out.append("\\")
                elif nxt == "n":
                    out.append("\n")
                else:
                    self.fail(f"HELP: invalid escape \\{nxt} (only \\\\ and \\n)")
                i += 2
                continue
            out.append(c)
            i += 1
        return "".join(out)

    # -- samples ---------------------------------------------------------------------------

    def sample(self, body):
        m = METRIC_NAME.match(body)
        if not m:
            self.fail("a sample must start with a metric name")
        name, end = m.group(), m.end()
        pos = _skip_blanks(body, end)
        labels = {}
        if body[pos:pos + 1] == "{":
            labels, pos = self.labels(body, pos + 1)
        elif pos == end and pos < len(body):
            self.fail(f"a blank expected after the metric name {name}")
        rest = body[pos:].strip(BLANKS)
        tokens = re.split(r"[ \t]+", rest) if rest else []
        if not tokens:
            self.fail(f"sample {name} without a value")
        if len(tokens) > 2:
            self.fail(f"sample {name}: more than a value and a timestamp")
        if not FLOAT.fullmatch(tokens[0]):
            self.fail(f"sample {name}: invalid value {tokens[0]!r}")
        val = float(tokens[0])
        ts = None
        if len(tokens) == 2:
            if not INT64.fullmatch(tokens[1]) or not -2 ** 63 <= int(tokens[1]) < 2 ** 63:
                self.fail(f"sample {name}: invalid timestamp {tokens[1]!r} (an int64 of milliseconds)")
            ts = int(tokens[1])

        fam = self.owner(name)
        if self.declared.get(fam) == "counter" and val < 0:
            self.fail(f"counter {name} is negative")
        key = (name, frozenset(labels.items()))
        if key in self.series:
            self.fail(f"the same series as line {self.series[key]} ({name} with the same labels)")
        self.enter(fam)
        self.series[key] = self.lineno
        self.family(fam).samples.append(Sample(name, labels, val, ts))

    def labels(self, body, pos):
        """Parses `name="value",...}` from pos (after the brace); returns (labels, pos after '}')."""
        labels = {}
        while True:
            pos = _skip_blanks(body, pos)
            if body[pos:pos + 1] == "}":
                return labels, pos + 1
            m = LABEL_NAME.match(body, pos)
            if not m:
                self.fail(f"invalid label name at column {pos + 1}")
            lname = m.group()
            if lname in labels:
                self.fail(f"label {lname} twice")
            pos = _skip_blanks(body, m.end())
            if body[pos:pos + 1] != "=":
                self.fail(f"label {lname}: '=' expected at column {pos + 1}")
            pos = _skip_blanks(body, pos + 1)
            if body[pos:pos + 1] != '"':
                self.fail(f"label {lname}: a double-quoted value expected at column {pos + 1}")
            labels[lname], pos = self.label_value(body, pos + 1, lname)
            pos = _skip_blanks(body, pos)
            c = body[pos:pos + 1]
            if c == ",":
                pos += 1
            elif c != "}":
                self.fail(f"',' or '}}' expected after label {lname} at column {pos + 1}")

    def label_value(self, body, pos, lname):
        out = []
        while pos < len(body):
            c = body[pos]
            if c == '"':
                return "".join(out), pos + 1
            if c == "\\":
                nxt = body[pos + 1:pos + 2]
                if nxt in ('\\', '"'):
                    out.append(nxt)
                elif nxt == "n":
                    out.append("\n")
                else:
                    self.fail(f'label {lname}: invalid escape \\{nxt} (only \\\\, \\" and \\n)')
                pos += 2
                continue
            out.append(c)
            pos += 1
        self.fail(f"label {lname}: unterminated value")


def _skip_blanks(s, pos):
    while pos < len(s) and s[pos] in BLANKS:
        pos += 1
    return pos


def _split_token(s):
    """(first token, separator, rest with leading blanks removed) of a blank-separated string."""
    s = s.lstrip(BLANKS)
    for i, c in enumerate(s):
        if c in BLANKS:
            return s[:i], c, s[i:].lstrip(BLANKS)
    return s, "", ""


def parse(text):
    """{family name: Family} of an exposition; ValueError naming the line when it breaks a rule."""
    if not isinstance(text, str):
        raise TypeError("parse() takes the exposition as str")
    return _Parser(text).run()


def value(families, name, **labels):
    """The value of the one sample named `name` whose labels include `labels`.

    KeyError when there is none, or when more than one matches (give more labels)."""
    found = [s for f in families.values() for s in f.samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    if len(found) != 1:
        have = [s.labels for f in families.values() for s in f.samples if s.name == name]
        what = "no sample" if not found else f"{len(found)} samples"
        raise KeyError(f"{what} {name} with labels {labels}; {name} has {have}")
    return found[0].value
