// The YAML subset and kubeconfig parsing (Multus's and kubectl's layouts).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cni/error.h"
#include "kube/kubeconfig.h"
#include "kube/yaml.h"
#include "../support.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {


// "-----BEGIN CERTIFICATE-----\nCA\n" and friends, base64: kubeconfigs carry PEM this way.
const char* kCaB64 = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCg==";
const char* kCertB64 = "Q0VSVAo=";   // "CERT\n"
const char* kKeyB64 = "S0VZCg==";    // "KEY\n"

}  // namespace

TEST_CASE("yaml: block and flow YAML become JSON") {
    auto j = kube::parse_yaml(R"(# comment
---
apiVersion: v1
kind: Config
empty:
list:
- a
- "b # not a comment"
- 'it''s'
nested:
  key: value # trailing comment
  url: https://[10.96.0.1]:443
  flag: true
  off: false
  nothing: ~
  num: 8080
  flow: []
  obj: {}
  json: ["x", 1]
items:
  - name: one
    value: 1
  -   name: two
      inner:
        - deep
  - - x
    - y
"quoted key": "tab\there \u00e9"
folded: >
  one
  two

  three
literal: |
  line 1
    indented
  line 3
strip: |-
  no newline
keep: |+
  kept

long: this plain scalar
  continues here
)",
                             "test");
    CHECK(j["apiVersion"] == "v1");
    CHECK(j["empty"].is_null());
    CHECK(j["list"] == json({"a", "b # not a comment", "it's"}));
    CHECK(j["nested"]["key"] == "value");
    CHECK(j["nested"]["url"] == "https://[10.96.0.1]:443");
    CHECK(j["nested"]["flag"] == true);
    CHECK(j["nested"]["off"] == false);
    CHECK(j["nested"]["nothing"].is_null());
    CHECK(j["nested"]["num"] == "8080");
    CHECK(j["nested"]["flow"] == json::array());
    CHECK(j["nested"]["obj"] == json::object());
    CHECK(j["nested"]["json"] == json({"x", 1}));
    CHECK(j["items"][0] == json({{"name", "one"}, {"value", "1"}}));
    CHECK(j["items"][1] == json({{"name", "two"}, {"inner", {"deep"}}}));
    CHECK(j["items"][2] == json({"x", "y"}));
    CHECK(j["quoted key"] == "tab\there \xc3\xa9");
    CHECK(j["folded"] == "one two\nthree\n");
    CHECK(j["literal"] == "line 1\n  indented\nline 3\n");
    CHECK(j["strip"] == "no newline");
    CHECK(j["keep"] == "kept\n\n");
    CHECK(j["long"] == "this plain scalar continues here");
}

TEST_CASE("yaml: quoted scalars over several lines fold as PyYAML and Go write them") {
    // What PyYAML writes for a NAD's spec.config holding pretty-printed JSON.
    auto j = kube::parse_yaml("spec:\n"
                             "  config: \"{\\n  \\\"cniVersion\\\": \\\"1.1.0\\\",\\n  \\\"type\\\"\\\n"
                             "    : \\\"topocni\\\",\\n  \\\"a\\\": [\\n\\\n"
                             "    \\ 1]\\n}\"\n"
                             "single: 'one\n  two\n\n  three' # comment\n"
                             "double: \"x\n\n\n  y\"\n",
                             "t");
    CHECK(j["spec"]["config"] == "{\n  \"cniVersion\": \"1.1.0\",\n  \"type\": \"topocni\",\n  \"a\": [\n 1]\n}");
    CHECK(nlohmann::json::parse(j["spec"]["config"].get<std::string>())["type"] == "topocni");
    CHECK(j["single"] == "one two\nthree");
    CHECK(j["double"] == "x\n\ny");
}

TEST_CASE("yaml: JSON input, and what is refused with the line it is on") {
    CHECK(kube::parse_yaml(R"({"a": [1, 2]})", "t")["a"][1] == 2);
    CHECK(kube::parse_yaml("a: [x, y]\n", "t")["a"] == json({"x", "y"}));
    CHECK(kube::parse_yaml("", "t").is_null());
    struct Row {
        std::string text;
        const char* want;
    };
    const Row rows[] = {
        {"a: &x 1\nb: *x\n", "line 1: anchors, aliases and tags"},
        {"a: 1\nb: *x\n", "line 2: anchors, aliases and tags"},
        {"a: !!str 1\n", "line 1: anchors, aliases and tags"},
        {"a: 1\n---\nb: 2\n", "line 2: several YAML documents"},
        {"a:\n\tb: 1\n", "line 2: tabs are not allowed"},
        {"a: 1\n  b: 2\n", "line 2: mapping values are not allowed"},
        {"a: 1\na: 2\n", "line 2: duplicate key 'a'"},
        {"a: \"open\n", "line 2: found unexpected end of stream (while scanning a quoted scalar)"},
        {"a: 'open\n  still open\n", "line 3: found unexpected end of stream (while scanning a quoted scalar)"},
        {"a: \"x\" y\n", "line 1: did not find expected key"},
        {"{oops", "line 2: did not find expected ',' or '}'"},
        {"- a\nb: 1\n", "line 2"},
        {"[x]: 1\n", "line 1: a mapping key must be a scalar"},
        {std::string(66, '['), "nested deeper than 64 levels"},
    };
    for (auto& r : rows) {
        std::string text = r.text;
        CAPTURE(text);
        std::string e = support::coded_error([&] { kube::parse_yaml(r.text, "what"); });
        CAPTURE(e);
        CHECK(e.rfind("7 what: ", 0) == 0);
        CHECK(e.find(r.want) != std::string::npos);
    }
}

TEST_CASE("base64: standard and URL alphabets, padding optional, garbage refused") {
    CHECK(kube::base64_decode("aGVsbG8=") == "hello");
    CHECK(kube::base64_decode("aGVsbG8") == "hello");
    CHECK(kube::base64_decode("aGVs\nbG8=\n") == "hello");
    CHECK(kube::base64_decode("") == "");
    CHECK(kube::base64_decode("-_8=") == std::string("\xfb\xff", 2));
    CHECK_FALSE(kube::base64_decode("a$=="));
    CHECK_FALSE(kube::base64_decode("aGVsbG8=x"));
    CHECK_FALSE(kube::base64_decode("a"));
}

TEST_CASE("kubeconfig: Multus's layout with inline CA and token") {
    std::string text = std::string(R"(# Kubeconfig file for Multus CNI plugin.
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://[10.96.0.1]:443
    certificate-authority-data: )") + kCaB64 + R"(
users:
- name: multus
  user:
    token: "eyJhbGciOi.x.y"
contexts:
- name: multus-context
  context:
    cluster: local
    user: multus
current-context: multus-context
)";
    auto kc = kube::parse_kubeconfig(text, "/etc/cni/net.d/multus.d/multus.kubeconfig");
    CHECK(kc.server == "https://10.96.0.1:443");   // brackets around IPv4 dropped
    CHECK(kc.ca_pem == "-----BEGIN CERTIFICATE-----\nCA\n");
    CHECK(kc.token == "eyJhbGciOi.x.y");
    CHECK(kc.client_cert_pem.empty());
    CHECK_FALSE(kc.insecure);
}

TEST_CASE("kubeconfig: kubectl's layout, client certificates, files relative to the kubeconfig") {
    char tmpl[] = "/tmp/topocni-kc-XXXXXX";
    fs::path dir = ::mkdtemp(tmpl);
    std::ofstream(dir / "ca.crt") << "CA FILE\n";
    std::ofstream(dir / "token") << "file-token\n";
    std::ofstream(dir / "client.crt") << "CERT FILE\n";
    std::ofstream(dir / "client.key") << "KEY FILE\n";

    SUBCASE("inline certificate and key, the second context is current") {
        std::string text = std::string(R"(apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: )") + kCaB64 + R"(
    server: https://127.0.0.1:6443/
  name: kind
- cluster:
    server: https://other:443
    insecure-skip-tls-verify: true
  name: other
contexts:
- context:
    cluster: other
    user: nobody
  name: first
- context:
    cluster: kind
    user: admin
  name: kind-kind
current-context: kind-kind
kind: Config
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: )" + kCertB64 + R"(
    client-key-data: )" + kKeyB64 + R"(
)";
        auto kc = kube::parse_kubeconfig(text, (dir / "config").string());
        CHECK(kc.server == "https://127.0.0.1:6443");
        CHECK(kc.client_cert_pem == "CERT\n");
        CHECK(kc.client_key_pem == "KEY\n");
        CHECK(kc.token.empty());
        CHECK_FALSE(kc.insecure);
    }
    SUBCASE("files, tokenFile and insecure-skip-tls-verify") {
        std::string text = R"(apiVersion: v1
clusters:
- name: c
  cluster:
    server: https://[fd00::1]:6443
    certificate-authority: ca.crt
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    tokenFile: token
    client-certificate: )" + (dir / "client.crt").string() + R"(
    client-key: client.key
contexts:
- name: x
  context: {"cluster": "c", "user": "u"}
current-context: x
)";
        auto kc = kube::parse_kubeconfig(text, (dir / "config").string());
        CHECK(kc.server == "https://[fd00::1]:6443");   // IPv6 keeps its brackets
        CHECK(kc.ca_pem == "CA FILE\n");
        CHECK(kc.token == "file-token");
        CHECK(kc.client_cert_pem == "CERT FILE\n");
        CHECK(kc.client_key_pem == "KEY FILE\n");
        CHECK(kc.insecure);
    }
    SUBCASE("JSON kubeconfig with one context and no current-context") {
        json j = {{"clusters", {{{"name", "c"}, {"cluster", {{"server", "http://127.0.0.1:8080"}}}}}},
                  {"contexts", {{{"name", "only"}, {"context", {{"cluster", "c"}}}}}}};
        auto kc = kube::parse_kubeconfig(j.dump(), (dir / "config").string());
        CHECK(kc.server == "http://127.0.0.1:8080");
        CHECK(kc.token.empty());
    }
    SUBCASE("errors name the key") {
        std::string base = R"(clusters:
- name: c
  cluster:
    server: https://s
contexts:
- name: x
  context:
    cluster: c
    user: u
current-context: x
)";
        struct Row {
            std::string text;
            const char* want;
        };
        const Row rows[] = {
            {base, "users: no entry named 'u'"},
            {base + "users:\n- name: u\n  user:\n    client-certificate-data: Q0VSVAo=\n",
             "users[\"u\"].user: client-certificate and client-key go together"},
            {base + "users:\n- name: u\n  user:\n    token-file: x\n    exec:\n      command: aws\n",
             "exec and auth-provider credentials are not supported"},
            {base + "users:\n- name: u\n  user:\n    tokenFile: missing-token\n", "users[\"u\"].user.tokenFile: '"},
            {base + "users:\n- name: u\n  user:\n    client-key-data: '%%%'\n    client-certificate-data: Q0VSVAo=\n",
             "users[\"u\"].user.client-key-data: not valid base64"},
            {"current-context: y\ncontexts: []\n", "contexts: no entry named 'y'"},
            {"clusters: []\n", "current-context: missing"},
            {"contexts:\n- name: x\n  context:\n    cluster: c\nclusters:\n- name: c\n  cluster:\n    server: ftp://x\n",
             "clusters[\"c\"].cluster.server: 'ftp://x' is not an http(s) URL"},
            {"contexts:\n- name: x\n  context:\n    cluster: c\nclusters:\n- name: c\n  cluster: {}\n",
             "clusters[\"c\"].cluster.server: missing"},
            {"- just a list\n", "not a kubeconfig"},
        };
        for (auto& r : rows) {
            CAPTURE(r.text);
            std::string e = support::coded_error([&] { kube::parse_kubeconfig(r.text, "/k/config"); });
            CHECK(e.rfind("7 kubeconfig '/k/config'", 0) == 0);
            CHECK(e.find(r.want) != std::string::npos);
        }
    }
    CHECK(support::coded_error([&] { kube::load_kubeconfig((dir / "absent").string()); }).find("does not exist") != std::string::npos);
    fs::remove_all(dir);
}

