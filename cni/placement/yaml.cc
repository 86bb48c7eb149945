#include "cni/placement/yaml.h"

#include <vector>

#include "cni/error.h"

namespace cni {

namespace {

using json = nlohmann::json;

class Parser {
public:
    Parser(const std::string& text, std::string what) : what_(std::move(what)) {
        size_t pos = 0;
        while (pos <= text.size()) {
            size_t nl = text.find('\n', pos);
            std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            lines_.push_back(std::move(line));
            if (nl == std::string::npos) break;
            pos = nl + 1;
        }
    }

    json document() {
        skip_blank();
        if (i_ < lines_.size() && starts_marker(content(lines_[i_]), "---")) {
            std::string rest = trim(strip_comment(content(lines_[i_]).substr(3)));
            if (!rest.empty()) fail("content after '---' is not supported");
            ++i_;
        }
        json out = node(0);
        skip_blank();
        if (i_ < lines_.size()) {
            if (starts_marker(content(lines_[i_]), "---")) fail("several YAML documents are not supported");
            if (!starts_marker(content(lines_[i_]), "...")) fail("unexpected indentation or content");
        }
        return out;
    }

private:
    std::vector<std::string> lines_;
    size_t i_ = 0;      // the next line to read
    size_t at_ = 0;     // the line being parsed, for messages
    std::string what_;

    [[noreturn]] void fail(const std::string& why) const {
        throw Error(kInvalidConfig, what_ + ": line " + std::to_string(at_ + 1) + ": " + why);
    }

    static std::string trim(const std::string& s) {
        size_t b = s.find_first_not_of(" \t");
        if (b == std::string::npos) return "";
        return s.substr(b, s.find_last_not_of(" \t") - b + 1);
    }

    static bool starts_marker(const std::string& c, const char* m) {
        return c.compare(0, 3, m) == 0 && (c.size() == 3 || c[3] == ' ' || c[3] == '\t');
    }

    int indent(const std::string& l) const {
        size_t n = 0;
        while (n < l.size() && l[n] == ' ') ++n;
        if (n < l.size() && l[n] == '\t') fail("tabs are not allowed for indentation");
        return static_cast<int>(n);
    }

    static std::string content(const std::string& l) {
        size_t n = l.find_first_not_of(' ');
        return n == std::string::npos ? "" : l.substr(n);
    }

    static bool blank(const std::string& l) {
        size_t n = l.find_first_not_of(" \t");
        return n == std::string::npos || l[n] == '#';
    }

    /// Moves to the next line with content, which becomes the one errors name.
    void skip_blank() {
        while (i_ < lines_.size() && blank(lines_[i_])) ++i_;
        at_ = i_;
    }

    /// A comment starts at '#' preceded by whitespace (or at the start), outside quotes.
    static std::string strip_comment(const std::string& s) {
        char quote = 0;
        for (size_t k = 0; k < s.size(); ++k) {
            char ch = s[k];
            if (quote) {
                if (quote == '"' && ch == '\\') ++k;
                else if (ch == quote) quote = 0;
            } else if ((ch == '"' || ch == '\'') && (k == 0 || s[k - 1] == ' ' || s[k - 1] == '[' || s[k - 1] == '{' ||
                                                     s[k - 1] == ',' || s[k - 1] == ':')) {
                quote = ch;
            } else if (ch == '#' && (k == 0 || s[k - 1] == ' ' || s[k - 1] == '\t')) {
                return s.substr(0, k);
            }
        }
        return s;
    }

    static bool is_seq_item(const std::string& c) { return c == "-" || c.compare(0, 2, "- ") == 0; }

    /// Position of the ':' ending a mapping key in `c`, or npos when `c` is no mapping entry.
    static size_t key_end(const std::string& c) {
        size_t k = 0;
        if (!c.empty() && (c[0] == '"' || c[0] == '\'')) {
            char q = c[0];
            for (k = 1; k < c.size(); ++k) {
                if (q == '"' && c[k] == '\\') { ++k; continue; }
                if (c[k] == q) {
                    if (q == '\'' && k + 1 < c.size() && c[k + 1] == '\'') { ++k; continue; }
                    break;
                }
            }
            if (k >= c.size()) return std::string::npos;
            ++k;
            size_t colon = c.find_first_not_of(' ', k);
            if (colon == std::string::npos || c[colon] != ':') return std::string::npos;
            return colon + 1 == c.size() || c[colon + 1] == ' ' ? colon : std::string::npos;
        }
        if (c.empty() || c[0] == '#' || c[0] == '{' || c[0] == '[') return std::string::npos;
        for (k = 0; k < c.size(); ++k) {
            if (c[k] == '#' && k > 0 && c[k - 1] == ' ') return std::string::npos;
            if (c[k] == ':' && (k + 1 == c.size() || c[k + 1] == ' ' || c[k + 1] == '\t')) return k;
        }
        return std::string::npos;
    }

    json node(int min_indent) {
        skip_blank();
        if (i_ >= lines_.size()) return nullptr;
        const std::string& l = lines_[i_];
        int ind = indent(l);
        if (ind < min_indent) return nullptr;
        std::string c = content(l);
        if (starts_marker(c, "---") || starts_marker(c, "...")) return nullptr;
        if (is_seq_item(c)) return sequence(ind);
        if (key_end(c) != std::string::npos) return mapping(ind);
        ++i_;
        return inline_value(trim(strip_comment(c)), ind - 1);
    }

    json sequence(int ind) {
        json arr = json::array();
        for (;;) {
            skip_blank();
            if (i_ >= lines_.size()) break;
            const std::string& l = lines_[i_];
            if (indent(l) != ind || !is_seq_item(content(l))) {
                if (indent(l) > ind) fail("unexpected indentation in a sequence");
                break;
            }
            std::string rest = content(l).substr(1);
            size_t sp = rest.find_first_not_of(' ');
            if (sp == std::string::npos || rest[sp] == '#') {
                ++i_;
                arr.push_back(node(ind + 1));
            } else {
                // "- key: value" or "- scalar": the item starts right after the dash, so
                // the line is rewritten with the dash as a space and read at that column.
                lines_[i_] = std::string(ind + 1 + sp, ' ') + rest.substr(sp);
                arr.push_back(node(ind + 1));
            }
        }
        return arr;
    }

    json mapping(int ind) {
        json obj = json::object();
        for (;;) {
            skip_blank();
            if (i_ >= lines_.size()) break;
            const std::string& l = lines_[i_];
            int li = indent(l);
            if (li < ind) break;
            std::string c = content(l);
            if (li > ind) fail("unexpected indentation");
            if (starts_marker(c, "---") || starts_marker(c, "...")) break;
            if (is_seq_item(c)) break;   // a sequence at a parent key's indentation ends here
            size_t colon = key_end(c);
            if (colon == std::string::npos) fail("expected 'key: value'");
            std::string raw_key = trim(c.substr(0, colon));
            json key = raw_key.empty() ? json("") : inline_value(raw_key, ind, /*key=*/true);
            std::string k = key.is_string() ? key.get<std::string>() : key.dump();
            if (obj.contains(k)) fail("duplicate key '" + k + "'");
            std::string rest = trim(strip_comment(c.substr(colon + 1)));
            ++i_;
            if (rest.empty()) {
                skip_blank();
                json v = nullptr;
                if (i_ < lines_.size()) {
                    int ni = indent(lines_[i_]);
                    if (ni > ind) v = node(ind + 1);
                    else if (ni == ind && is_seq_item(content(lines_[i_]))) v = sequence(ind);
                }
                obj[k] = std::move(v);
            } else if (rest[0] == '|' || rest[0] == '>') {
                obj[k] = block_scalar(trim(c.substr(colon + 1)), ind);
            } else {
                obj[k] = inline_value(rest, ind);
            }
        }
        return obj;
    }

    /// Literal (|) and folded (>) block scalars with chomping (-, +) and an optional
    /// indentation digit.
    json block_scalar(const std::string& header_in, int parent) {
        std::string header = trim(strip_comment(header_in));
        bool folded = header[0] == '>';
        char chomp = 0;
        int explicit_indent = 0;
        for (size_t k = 1; k < header.size(); ++k) {
            if ((header[k] == '-' || header[k] == '+') && !chomp) chomp = header[k];
            else if (header[k] >= '1' && header[k] <= '9' && !explicit_indent) explicit_indent = header[k] - '0';
            else fail("bad block scalar header '" + header + "'");
        }
        int ci = explicit_indent ? parent + explicit_indent : -1;
        std::vector<std::string> body;
        while (i_ < lines_.size()) {
            const std::string& l = lines_[i_];
            if (l.find_first_not_of(' ') == std::string::npos) { body.emplace_back(); ++i_; continue; }
            int li = indent(l);
            if (ci < 0) {
                if (li <= parent) break;
                ci = li;
            }
            if (li < ci) break;
            body.push_back(l.substr(ci));
            ++i_;
        }
        size_t trailing = 0;
        while (trailing < body.size() && body[body.size() - 1 - trailing].empty()) ++trailing;
        std::vector<std::string> text(body.begin(), body.end() - trailing);
        std::string out;
        for (size_t k = 0; k < text.size(); ++k) {
            if (k > 0 && !folded) out += "\n";
            if (k > 0 && folded) {
                // Folding: a line break between two text lines becomes a space; each
                // blank line stands for one newline; more-indented lines keep theirs.
                const std::string &prev = text[k - 1], &cur = text[k];
                if (cur.empty()) out += "\n";
                else if (prev.empty()) {}
                else if (prev[0] == ' ' || cur[0] == ' ') out += "\n";
                else out += " ";
            }
            out += text[k];
        }
        if (chomp == '-' || text.empty()) return out;
        out += "\n";
        if (chomp == '+') out += std::string(trailing, '\n');
        return out;
    }

    /// A scalar or flow collection that starts on the current line; plain scalars may
    /// continue on more-indented lines (folded with spaces).
    json inline_value(const std::string& s, int parent, bool key = false) {
        if (s.empty()) return nullptr;
        char c0 = s[0];
        if (c0 == '&' || c0 == '*' || c0 == '!') fail("anchors, aliases and tags are not supported");
        if (c0 == '"') return double_quoted(quoted_lines(s));
        if (c0 == '\'') return single_quoted(quoted_lines(s));
        if (c0 == '{' || c0 == '[') {
            auto j = json::parse(s, nullptr, false);
            if (j.is_discarded()) fail("flow collections must be written as JSON: '" + s + "'");
            return j;
        }
        std::string v = s;
        if (!key) {
            // Multi-line plain scalar: following lines indented deeper than the parent.
            while (i_ < lines_.size() && !blank(lines_[i_]) && indent(lines_[i_]) > parent &&
                   key_end(content(lines_[i_])) == std::string::npos && !is_seq_item(content(lines_[i_]))) {
                v += " " + trim(strip_comment(content(lines_[i_])));
                ++i_;
            }
        }
        if (key) return v;
        if (v == "true" || v == "True" || v == "TRUE") return true;
        if (v == "false" || v == "False" || v == "FALSE") return false;
        if (v == "null" || v == "Null" || v == "NULL" || v == "~") return nullptr;
        return v;
    }

    /// Where the quoted scalar starting at s[0] ends, npos when not on this text.
    static size_t closing_quote(const std::string& s) {
        char q = s[0];
        for (size_t k = 1; k < s.size(); ++k) {
            if (q == '"' && s[k] == '\\') ++k;
            else if (s[k] == q) {
                if (q == '\'' && k + 1 < s.size() && s[k + 1] == '\'') ++k;
                else return k;
            }
        }
        return std::string::npos;
    }

    /// A quoted scalar with the lines it continues on, folded as YAML does: a line break
    /// becomes a space, each blank line a newline, and in double quotes a line ending in
    /// an unescaped backslash joins the next line directly (PyYAML and Go write long
    /// strings like that).
    std::string quoted_lines(const std::string& first) {
        std::string text = first;
        bool after_blank = false;
        while (closing_quote(text) == std::string::npos && i_ < lines_.size()) {
            std::string t = trim(lines_[i_++]);
            if (t.empty()) {
                text += '\n';
                after_blank = true;
                continue;
            }
            size_t slashes = 0;
            while (slashes < text.size() && text[text.size() - 1 - slashes] == '\\') ++slashes;
            if (text[0] == '"' && slashes % 2 == 1) text.pop_back();   // an escaped line break
            else if (!after_blank) text += ' ';
            after_blank = false;
            text += t;
        }
        return text;
    }

    void after_quote(const std::string& rest) const {
        std::string r = trim(rest);
        if (!r.empty() && r[0] != '#') fail("unexpected text after a quoted string");
    }

    json single_quoted(const std::string& s) {
        std::string out;
        size_t k = 1;
        for (; k < s.size(); ++k) {
            if (s[k] == '\'') {
                if (k + 1 < s.size() && s[k + 1] == '\'') { out += '\''; ++k; continue; }
                break;
            }
            out += s[k];
        }
        if (k >= s.size()) fail("unterminated quoted string");
        after_quote(s.substr(k + 1));
        return out;
    }

    static void put_utf8(std::string& out, unsigned long cp) {
        if (cp < 0x80) out += static_cast<char>(cp);
        else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
        else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    json double_quoted(const std::string& s) {
        std::string out;
        size_t k = 1;
        for (; k < s.size() && s[k] != '"'; ++k) {
            if (s[k] != '\\') { out += s[k]; continue; }
            if (++k >= s.size()) break;
            switch (s[k]) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case '0': out += '\0'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'e': out += '\x1b'; break;
                case ' ': case '"': case '\\': case '/': out += s[k]; break;
                case 'x': case 'u': case 'U': {
                    size_t n = s[k] == 'x' ? 2 : s[k] == 'u' ? 4 : 8;
                    if (k + n >= s.size()) fail("bad escape in a quoted string");
                    unsigned long cp = std::stoul(s.substr(k + 1, n), nullptr, 16);
                    put_utf8(out, cp);
                    k += n;
                    break;
                }
                default: fail(std::string("unknown escape '\\") + s[k] + "'");
            }
        }
        if (k >= s.size()) fail("unterminated quoted string");
        after_quote(s.substr(k + 1));
        return out;
    }
};

}  // namespace

json parse_yaml(const std::string& text, const std::string& what) {
    size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
        auto j = json::parse(text, nullptr, false);
        if (j.is_discarded()) throw Error(kInvalidConfig, what + ": not valid JSON");
        return j;
    }
    try {
        return Parser(text, what).document();
    } catch (const std::invalid_argument&) {
        throw Error(kInvalidConfig, what + ": bad escape in a quoted string");
    } catch (const std::out_of_range&) {
        throw Error(kInvalidConfig, what + ": bad escape in a quoted string");
    }
}

}  // namespace cni
