// Test-only CEL evaluator for DRA device selectors, shaped like kube-scheduler's
// (k8s.io/dynamic-resource-allocation/cel/compile.go), on top of @bufbuild/cel 0.6.1.
//
// Protocol: one JSON object per line on stdin,
//   {"expr": "<CEL>", "device": {"driver", "name", "attributes", "capacity", "allowMultipleAllocations"}}
// (device = a resource.k8s.io/v1 Device as served, plus its slice's driver); one JSON line
// per input on stdout: {"value": true|false} or {"error": "<why>"}.
//
// What kube-scheduler has and @bufbuild/cel lacks is added here:
//  - the `device` variable: attributes/capacity grouped as map[domain]map[id], an unknown
//    domain reading as an empty map, an unknown id as an evaluation error;
//  - the Kubernetes quantity library (quantity(), isQuantity(), and the Quantity members)
//    and the semver library (semver(), isSemver(), and the Semver members);
//  - cel.bind(var, init, expr) (ext.Bindings), by rewriting the parsed AST.
// Not available (the parser rejects them): optional syntax `.?x`, `[?k]`, optional.*.
// There is no type checker, so no compile-time errors and no cost limit: an expression
// kube-scheduler would refuse at compile time may fail here only when evaluated, or pass.

import { createInterface } from "node:readline";
import { celEnv, celFunc, celMap, celMethod, CelScalar, isCelError, objectType, parse, plan } from "@bufbuild/cel";
import { create, createFileRegistry } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

const { INT, BOOL, STRING, DOUBLE } = CelScalar;

// ---------------------------------------------------------------------------------------
// Opaque value types. @bufbuild/cel only knows protobuf messages as object types, so
// Quantity and Semver are tiny messages declared at run time. Their fields hold normalized
// values (a reduced fraction; a version without build metadata) so that CEL's structural
// message equality is the semantic equality Kubernetes has: quantity("1") == quantity("1000m").
const registry = createFileRegistry(
  create(FileDescriptorProtoSchema, {
    name: "topocni/dra_cel.proto",
    package: "kubernetes",
    syntax: "proto3",
    messageType: [
      {
        name: "Quantity",
        field: [
          { name: "num", number: 1, type: 9 /* string */, label: 1, jsonName: "num" },
          { name: "den", number: 2, type: 9, label: 1, jsonName: "den" },
        ],
      },
      {
        name: "Semver",
        field: [
          { name: "major", number: 1, type: 9, label: 1, jsonName: "major" },
          { name: "minor", number: 2, type: 9, label: 1, jsonName: "minor" },
          { name: "patch", number: 3, type: 9, label: 1, jsonName: "patch" },
          { name: "pre", number: 4, type: 9, label: 1, jsonName: "pre" },
        ],
      },
    ],
  }),
  () => undefined,
);
const QuantityDesc = registry.getMessage("kubernetes.Quantity");
const SemverDesc = registry.getMessage("kubernetes.Semver");
const QUANTITY = objectType(QuantityDesc);
const SEMVER = objectType(SemverDesc);

// ---------------------------------------------------------------------------------------
// Quantity: exact rationals with BigInt (num/den, den > 0, reduced).

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const abs = (x) => (x < 0n ? -x : x);
const gcd = (a, b) => {
  a = abs(a);
  b = abs(b);
  while (b) [a, b] = [b, a % b];
  return a;
};

function rational(num, den) {
  if (den < 0n) [num, den] = [-num, -den];
  const g = gcd(num, den) || 1n;
  return { num: num / g, den: den / g };
}

const BINARY = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DECIMAL = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
// resource.Quantity's grammar: <signedNumber><suffix>, suffix binary SI, decimal SI, or
// a decimal exponent e<signedInt> / E<signedInt>.
const QUANTITY_RE = /^([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$/;

/** Parses a Kubernetes quantity string exactly; throws on a malformed one. */
function parseQuantity(s) {
  const m = typeof s === "string" ? QUANTITY_RE.exec(s) : null;
  if (!m || (m[2] === "" && (m[3] ?? "") === "")) throw new Error(`quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`);
  const [, sign, whole, frac = "", suffix = ""] = m;
  let num = BigInt((whole || "0") + frac);
  let den = 10n ** BigInt(frac.length);
  if (sign === "-") num = -num;
  if (suffix in BINARY) {
    num *= 1n << BINARY[suffix];
  } else {
    const exp = suffix in DECIMAL ? DECIMAL[suffix] : Number(suffix.slice(1));
    if (exp >= 0) num *= 10n ** BigInt(exp);
    else den *= 10n ** BigInt(-exp);
  }
  // resource.Quantity holds nothing finer than 1n: finer values round up (towards +inf).
  const NANO = 10n ** 9n;
  if (NANO % rational(num, den).den !== 0n) {
    const scaled = num * NANO;
    let q = scaled / den;
    if (scaled % den !== 0n && scaled > 0n) q += 1n;
    return rational(q, NANO);
  }
  return rational(num, den);
}

const toQuantity = (r) => reflect(QuantityDesc, create(QuantityDesc, { num: r.num.toString(), den: r.den.toString() }));
const fromQuantity = (q) => ({ num: BigInt(q.message.num), den: BigInt(q.message.den) });
const cmp = (a, b) => {
  const d = a.num * b.den - b.num * a.den;
  return d < 0n ? -1n : d > 0n ? 1n : 0n;
};
const plus = (a, b) => rational(a.num * b.den + b.num * a.den, a.den * b.den);
const neg = (a) => ({ num: -a.num, den: a.den });
const integral = (r) => r.den === 1n && r.num >= INT64_MIN && r.num <= INT64_MAX;

const quantityFuncs = [
  celFunc("quantity", [STRING], QUANTITY, (s) => toQuantity(parseQuantity(s))),
  celFunc("isQuantity", [STRING], BOOL, (s) => {
    try {
      parseQuantity(s);
      return true;
    } catch {
      return false;
    }
  }),
  celMethod("sign", QUANTITY, [], INT, function () {
    const { num } = fromQuantity(this);
    return num < 0n ? -1n : num > 0n ? 1n : 0n;
  }),
  celMethod("isGreaterThan", QUANTITY, [QUANTITY], BOOL, function (o) {
    return cmp(fromQuantity(this), fromQuantity(o)) > 0n;
  }),
  celMethod("isLessThan", QUANTITY, [QUANTITY], BOOL, function (o) {
    return cmp(fromQuantity(this), fromQuantity(o)) < 0n;
  }),
  celMethod("compareTo", QUANTITY, [QUANTITY], INT, function (o) {
    return cmp(fromQuantity(this), fromQuantity(o));
  }),
  celMethod("asApproximateFloat", QUANTITY, [], DOUBLE, function () {
    const { num, den } = fromQuantity(this);
    return Number(num) / Number(den);
  }),
  celMethod("isInteger", QUANTITY, [], BOOL, function () {
    return integral(fromQuantity(this));
  }),
  celMethod("asInteger", QUANTITY, [], INT, function () {
    const r = fromQuantity(this);
    if (!integral(r)) throw new Error("cannot convert value to integer");
    return r.num;
  }),
  celMethod("add", QUANTITY, [QUANTITY], QUANTITY, function (o) {
    return toQuantity(plus(fromQuantity(this), fromQuantity(o)));
  }),
  celMethod("add", QUANTITY, [INT], QUANTITY, function (i) {
    return toQuantity(plus(fromQuantity(this), { num: i, den: 1n }));
  }),
  celMethod("sub", QUANTITY, [QUANTITY], QUANTITY, function (o) {
    return toQuantity(plus(fromQuantity(this), neg(fromQuantity(o))));
  }),
  celMethod("sub", QUANTITY, [INT], QUANTITY, function (i) {
    return toQuantity(plus(fromQuantity(this), { num: -i, den: 1n }));
  }),
];

// ---------------------------------------------------------------------------------------
// Semver (version attributes), compared by semver.org 2.0.0 precedence.

const SEMVER_RE = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$/;

function parseSemver(s) {
  const m = typeof s === "string" ? SEMVER_RE.exec(s) : null;
  if (!m) throw new Error(`could not parse semantic version: ${s}`);
  return { major: BigInt(m[1]), minor: BigInt(m[2]), patch: BigInt(m[3]), pre: m[4] ?? "" };
}
const toSemver = (v) =>
  reflect(SemverDesc, create(SemverDesc, { major: `${v.major}`, minor: `${v.minor}`, patch: `${v.patch}`, pre: v.pre }));
const fromSemver = (s) => ({ major: BigInt(s.message.major), minor: BigInt(s.message.minor), patch: BigInt(s.message.patch), pre: s.message.pre });

function semverCmp(a, b) {
  for (const k of ["major", "minor", "patch"]) if (a[k] !== b[k]) return a[k] < b[k] ? -1n : 1n;
  if (a.pre === b.pre) return 0n;
  if (!a.pre) return 1n; // a release ranks above its pre-releases
  if (!b.pre) return -1n;
  const pa = a.pre.split("."), pb = b.pre.split(".");
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const na = /^\d+$/.test(pa[i]), nb = /^\d+$/.test(pb[i]);
    if (pa[i] === pb[i]) continue;
    if (na && nb) return BigInt(pa[i]) < BigInt(pb[i]) ? -1n : 1n;
    if (na !== nb) return na ? -1n : 1n; // numeric identifiers rank lower
    return pa[i] < pb[i] ? -1n : 1n;
  }
  return pa.length === pb.length ? 0n : pa.length < pb.length ? -1n : 1n;
}

const semverFuncs = [
  celFunc("semver", [STRING], SEMVER, (s) => toSemver(parseSemver(s))),
  celFunc("isSemver", [STRING], BOOL, (s) => {
    try {
      parseSemver(s);
      return true;
    } catch {
      return false;
    }
  }),
  celMethod("isGreaterThan", SEMVER, [SEMVER], BOOL, function (o) {
    return semverCmp(fromSemver(this), fromSemver(o)) > 0n;
  }),
  celMethod("isLessThan", SEMVER, [SEMVER], BOOL, function (o) {
    return semverCmp(fromSemver(this), fromSemver(o)) < 0n;
  }),
  celMethod("compareTo", SEMVER, [SEMVER], INT, function (o) {
    return semverCmp(fromSemver(this), fromSemver(o));
  }),
  celMethod("major", SEMVER, [], INT, function () {
    return fromSemver(this).major;
  }),
  celMethod("minor", SEMVER, [], INT, function () {
    return fromSemver(this).minor;
  }),
  celMethod("patch", SEMVER, [], INT, function () {
    return fromSemver(this).patch;
  }),
];

const env = celEnv({ registry, funcs: [...quantityFuncs, ...semverFuncs] });

// ---------------------------------------------------------------------------------------
// cel.bind(x, init, body): cel-go's ext.Bindings macro expands it to a comprehension over
// an empty list whose accumulator is x = init and whose result is body. @bufbuild/cel has
// no such macro, so the parsed AST is rewritten the same way before planning.

function rewriteBind(node) {
  if (node === null || typeof node !== "object") return;
  if (Array.isArray(node)) {
    node.forEach(rewriteBind);
    return;
  }
  for (const v of Object.values(node)) rewriteBind(v);
  const kind = node.exprKind;
  if (kind?.case !== "callExpr") return;
  const call = kind.value;
  const target = call.target?.exprKind;
  if (call.function !== "bind" || target?.case !== "identExpr" || target.value.name !== "cel") return;
  const [name, init, body] = call.args;
  if (call.args.length !== 3 || name.exprKind?.case !== "identExpr")
    throw new Error("cel.bind() variable names must be simple identifiers");
  const expr = (exprKind) => ({ $typeName: "cel.expr.Expr", id: node.id, exprKind });
  node.exprKind = {
    case: "comprehensionExpr",
    value: {
      $typeName: "cel.expr.Expr.Comprehension",
      iterVar: "#unused",
      iterVar2: "",
      iterRange: expr({ case: "listExpr", value: { $typeName: "cel.expr.Expr.CreateList", elements: [], optionalIndices: [] } }),
      accuVar: name.exprKind.value.name,
      accuInit: init,
      loopCondition: expr({ case: "constExpr", value: { $typeName: "cel.expr.Constant", constantKind: { case: "boolValue", value: false } } }),
      loopStep: expr({ case: "identExpr", value: { $typeName: "cel.expr.Expr.Ident", name: name.exprKind.value.name } }),
      result: body,
    },
  };
}

// ---------------------------------------------------------------------------------------
// The `device` variable, as DeviceMatches builds it.

const MAP_MARK = Symbol.for("@bufbuild/cel/map"); // what @bufbuild/cel's isCelMap() looks for
const EMPTY = celMap(new Map());

/** A CEL map whose lookup of a missing key yields an empty map (compile.go's
 *  newStringInterfaceMapWithDefault): device.attributes["other.domain"] is {}. `in` and
 *  has() still see only the keys that exist. `inner` maps a domain to a CelMap. */
function mapWithDefault(inner) {
  return {
    [MAP_MARK]: {},
    get size() {
      return inner.size;
    },
    get: (k) => (inner.has(k) ? inner.get(k) : EMPTY),
    has: (k) => inner.has(k),
    forEach: (cb, self) => inner.forEach((v, k) => cb.call(self, v, k)),
    entries: () => inner.entries(),
    keys: () => inner.keys(),
    values: () => inner.values(),
    [Symbol.iterator]: () => inner.entries(),
  };
}

/** parseQualifiedName: split at the first '/'; an unqualified name is the driver's. */
function qualified(name, driver) {
  const i = name.indexOf("/");
  return i < 0 ? [driver, name] : [name.slice(0, i), name.slice(i + 1)];
}

function attributeValue(name, a) {
  if (a === null || typeof a !== "object") throw new Error(`attribute ${name}: unsupported attribute value`);
  const int = (x) => BigInt(x);
  if ("ints" in a) return a.ints.map(int);
  if ("bools" in a) return a.bools;
  if ("strings" in a) return a.strings;
  if ("versions" in a) return a.versions.map((v) => toSemver(parseSemver(v)));
  if ("int" in a) return int(a.int);
  if ("bool" in a) return a.bool;
  if ("string" in a) return a.string;
  if ("version" in a) return toSemver(parseSemver(a.version));
  throw new Error(`attribute ${name}: unsupported attribute value`);
}

function deviceVariable(d) {
  const driver = d.driver ?? "";
  const group = (entries, value) => {
    const out = new Map();
    for (const [name, v] of Object.entries(entries ?? {})) {
      const [domain, id] = qualified(name, driver);
      if (!out.has(domain)) out.set(domain, new Map());
      out.get(domain).set(id, value(name, v));
    }
    return mapWithDefault(new Map([...out].map(([domain, ids]) => [domain, celMap(ids)])));
  };
  return new Map([
    ["driver", driver],
    ["allowMultipleAllocations", d.allowMultipleAllocations === true],
    ["attributes", group(d.attributes, attributeValue)],
    ["capacity", group(d.capacity, (name, c) => toQuantity(parseQuantity(String(c?.value))))],
  ]);
}

// ---------------------------------------------------------------------------------------

const plans = new Map(); // expression -> planned program (or the parse error)

function compile(expr) {
  if (!plans.has(expr)) {
    try {
      const ast = parse(expr);
      rewriteBind(ast.expr);
      plans.set(expr, plan(env, ast));
    } catch (e) {
      plans.set(expr, new Error(`compilation failed: ${e.message}`));
    }
  }
  return plans.get(expr);
}

function evaluate(req) {
  if (typeof req?.expr !== "string") throw new Error("request has no expr");
  const program = compile(req.expr);
  if (program instanceof Error) throw program;
  const result = program({ device: deviceVariable(req.device ?? {}) });
  if (isCelError(result)) throw new Error(result.message);
  // CompileCELExpression insists on a bool (or a dynamic value that turns out bool).
  if (typeof result !== "boolean") throw new Error(`CEL result is not a bool`);
  return result;
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let out;
  try {
    out = { value: evaluate(JSON.parse(line)) };
  } catch (e) {
    out = { error: String(e?.message ?? e) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
