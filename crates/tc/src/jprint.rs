//! One printer for tc's two output forms, as iproute2's `json_print.c` over `json_writer.c`: each
//! `print_*` call names a JSON key and a text fragment, and the printer writes whichever form `-j`
//! asked for. Printing code written once against it gives the text tc prints and the JSON `tc -j`
//! prints, key order, repeated keys (u32's `match`) and all, which a map-based JSON value cannot.
//!
//! The JSON form follows `json_writer.c` exactly: compact (`{"a":1,"b":"x"}`), or with `-p` a newline
//! and four spaces per level before each key and closing bracket, `": "` after a key; strings escape
//! `\t \n \r \f \b \\ "` and nothing else; the document ends with a newline.

use std::fmt::{Display, Write};

/// `json_writer_t`.
struct JsonWriter {
    out: String,
    depth: usize,
    pretty: bool,
    /// `sep`: ',' once a value has been written at this level, else none.
    sep: bool,
}

impl JsonWriter {
    fn indent(&mut self) {
        for _ in 0..self.depth {
            self.out.push_str("    ");
        }
    }
    fn eol(&mut self) {
        if self.pretty {
            self.out.push('\n');
            self.indent();
        }
    }
    fn eor(&mut self) {
        if self.sep {
            self.out.push(',');
        }
        self.sep = true;
    }
    fn puts(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '\t' => self.out.push_str("\\t"),
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\u{c}' => self.out.push_str("\\f"),
                '\u{8}' => self.out.push_str("\\b"),
                '\\' => self.out.push_str("\\\\"),
                '"' => self.out.push_str("\\\""),
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
    fn begin(&mut self, c: char) {
        self.eor();
        self.out.push(c);
        self.depth += 1;
        self.sep = false;
    }
    fn end(&mut self, c: char) {
        self.depth = self.depth.saturating_sub(1);
        if self.sep {
            self.eol();
        }
        self.out.push(c);
        self.sep = true;
    }
    /// `jsonw_start_array`: with `-p`, a space after the bracket.
    fn start_array(&mut self) {
        self.begin('[');
        if self.pretty {
            self.out.push(' ');
        }
    }
    /// `jsonw_end_array`: with `-p`, a space before the bracket, which stays on the line.
    fn end_array(&mut self) {
        if self.pretty && self.sep {
            self.out.push(' ');
        }
        self.sep = false;
        self.end(']');
    }
    fn name(&mut self, name: &str) {
        self.eor();
        self.eol();
        self.sep = false;
        self.puts(name);
        self.out.push(':');
        if self.pretty {
            self.out.push(' ');
        }
    }
    /// `jsonw_printf`: a bare value (number, true, null).
    fn value(&mut self, v: &str) {
        self.eor();
        self.out.push_str(v);
    }
    fn string(&mut self, v: &str) {
        self.eor();
        self.puts(v);
    }
}

/// Where tc writes a listing: text, or JSON (`-j`, `-p`).
pub struct Printer {
    text: String,
    json: Option<JsonWriter>,
}

impl Printer {
    /// A printer for the form `flags` ask for. A JSON listing is an array (`new_json_obj`).
    pub fn new(flags: crate::ShowFlags) -> Printer {
        let mut p = Printer {
            text: String::new(),
            json: flags.json.then(|| JsonWriter {
                out: String::new(),
                depth: 0,
                pretty: flags.pretty,
                sep: false,
            }),
        };
        if let Some(j) = p.json.as_mut() {
            j.start_array();
        }
        p
    }

    /// Room for `n` more bytes of text (JSON grows as it goes).
    pub fn reserve(&mut self, n: usize) {
        if self.json.is_none() {
            self.text.reserve(n);
        }
    }

    pub fn is_json(&self) -> bool {
        self.json.is_some()
    }

    /// What was printed; a JSON listing is closed (`delete_json_obj`: the array, then a newline).
    pub fn finish(self) -> String {
        match self.json {
            Some(mut j) => {
                j.end_array();
                j.out.push('\n');
                j.out
            }
            None => self.text,
        }
    }

    /// `fprintf(f, …)`: text that goes out whatever the form (tc's printers that were never converted
    /// to the JSON API, such as fw's and flow's, write into the JSON stream as it is).
    pub fn raw(&mut self, s: &str) {
        match self.json.as_mut() {
            Some(j) => j.out.push_str(s),
            None => self.text.push_str(s),
        }
    }

    /// `PRINT_FP`: text only.
    pub fn fp(&mut self, s: impl Display) {
        if self.json.is_none() {
            self.put(s);
        }
    }

    /// `print_nl`: a newline in text.
    pub fn nl(&mut self) {
        self.fp_str("\n");
    }

    /// [`Printer::fp`] of a plain string, without the formatting machinery.
    pub fn fp_str(&mut self, s: &str) {
        if self.json.is_none() {
            self.text.push_str(s);
        }
    }

    /// `print_string(PRINT_ANY, key, "BEFORE%sAFTER", value)` with the value written by `value`:
    /// straight into the text (a listing of 10 000 filters prints a handle or two each: no string
    /// and no `format_args!` per field), or into a string for JSON.
    pub fn string_with(
        &mut self,
        key: &str,
        before: &str,
        value: impl FnOnce(&mut String),
        after: &str,
    ) {
        self.field_with(key, before, value, after, true);
    }

    /// `print_uint(PRINT_ANY, key, "BEFORE%uAFTER", value)`, the digits appended as
    /// [`crate::util::push_u64`] writes them.
    pub fn uint(&mut self, key: &str, before: &str, value: u64, after: &str) {
        self.field_with(
            key,
            before,
            |s| crate::util::push_u64(s, value),
            after,
            false,
        );
    }

    /// `print_int(PRINT_ANY, key, "BEFORE%dAFTER", value)`.
    pub fn int(&mut self, key: &str, before: &str, value: i64, after: &str) {
        self.field_with(
            key,
            before,
            |s| crate::util::push_i64(s, value),
            after,
            false,
        );
    }

    /// A field whose value `value` writes: in text between `before` and `after`, in JSON as a
    /// string (`quoted`) or bare (a number).
    fn field_with(
        &mut self,
        key: &str,
        before: &str,
        value: impl FnOnce(&mut String),
        after: &str,
        quoted: bool,
    ) {
        match self.json.as_mut() {
            Some(j) => {
                let mut v = String::new();
                value(&mut v);
                j.name(key);
                if quoted {
                    j.string(&v);
                } else {
                    j.value(&v);
                }
            }
            None => {
                self.text.push_str(before);
                value(&mut self.text);
                self.text.push_str(after);
            }
        }
    }

    /// `print_hex(PRINT_ANY, key, "BEFORE%xAFTER", value)`, or `%08x` with `zero_pad8`; in JSON
    /// the value's hex digits as a string, unpadded (as [`Printer::hex`]).
    pub fn hex_parts(&mut self, key: &str, before: &str, value: u32, zero_pad8: bool, after: &str) {
        let digits = (32 - value.leading_zeros().min(31)).div_ceil(4) as usize;
        let pad = if zero_pad8 && self.json.is_none() {
            8 - digits
        } else {
            0
        };
        let hex = |s: &mut String| {
            s.extend(std::iter::repeat_n('0', pad));
            crate::util::push_hex(s, value);
        };
        self.field_with(key, before, hex, after, true);
    }

    /// `print_string(PRINT_ANY, key, fmt, value)`, with `text` the formatted fragment: a `&str`, or
    /// `format_args!(…)`, which is formatted only for text and straight into it (a listing of 10 000
    /// filters would otherwise build and drop a string per field).
    pub fn string(&mut self, key: &str, text: impl Display, value: &str) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.string(value);
            }
            None => self.put(text),
        }
    }

    fn put(&mut self, text: impl Display) {
        let _ = write!(self.text, "{text}");
    }

    /// `print_string(PRINT_JSON, key, NULL, value)`.
    pub fn json_string(&mut self, key: &str, value: &str) {
        if let Some(j) = self.json.as_mut() {
            j.name(key);
            j.string(value);
        }
    }

    /// `print_string(PRINT_ANY, NULL, "%s", value)`: a value without a key in JSON.
    pub fn bare_string(&mut self, value: &str) {
        match self.json.as_mut() {
            Some(j) => j.string(value),
            None => self.text.push_str(value),
        }
    }

    /// `print_uint`/`print_u64`/`print_int` with PRINT_ANY.
    pub fn number(&mut self, key: &str, text: impl Display, value: impl Display) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.value(&value.to_string());
            }
            None => self.put(text),
        }
    }

    /// `print_uint(PRINT_JSON, key, NULL, value)`.
    pub fn json_number(&mut self, key: &str, value: impl std::fmt::Display) {
        if let Some(j) = self.json.as_mut() {
            j.name(key);
            j.value(&value.to_string());
        }
    }

    /// `print_hex`: in JSON the value as a string of lowercase hex digits (`"ffff"`).
    pub fn hex(&mut self, key: &str, text: impl Display, value: u32) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.string(&format!("{value:x}"));
            }
            None => self.put(text),
        }
    }

    /// `print_0xhex`: in JSON `"%#llx"` (`"0x10"`; C prints 0 without the prefix).
    pub fn hex0x(&mut self, key: &str, text: impl Display, value: u64) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.string(&if value == 0 {
                    "0".to_string()
                } else {
                    format!("{value:#x}")
                });
            }
            None => self.put(text),
        }
    }

    /// `print_bool(PRINT_ANY, key, fmt, value)`.
    pub fn boolean(&mut self, key: &str, text: &str, value: bool) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.value(if value { "true" } else { "false" });
            }
            None => self.text.push_str(text),
        }
    }

    /// `print_null(PRINT_ANY, key, fmt, …)`.
    pub fn null(&mut self, key: &str, text: impl Display) {
        match self.json.as_mut() {
            Some(j) => {
                j.name(key);
                j.value("null");
            }
            None => self.put(text),
        }
    }

    /// `open_json_object(key)`; `None` inside an array.
    pub fn open_object(&mut self, key: Option<&str>) {
        if let Some(j) = self.json.as_mut() {
            if let Some(k) = key {
                j.name(k);
            }
            j.begin('{');
        }
    }

    pub fn close_object(&mut self) {
        if let Some(j) = self.json.as_mut() {
            j.end('}');
        }
    }

    /// `open_json_array(PRINT_JSON, key)`.
    pub fn open_array(&mut self, key: &str) {
        if let Some(j) = self.json.as_mut() {
            j.name(key);
            j.start_array();
        }
    }

    pub fn close_array(&mut self) {
        if let Some(j) = self.json.as_mut() {
            j.end_array();
        }
    }
}

impl Printer {
    /// A JSON value built as a map (the qdisc printers' options), written through the writer: key
    /// order kept, `-p` laid out as `json_writer.c` lays it out.
    pub fn value(&mut self, key: Option<&str>, v: &serde_json::Value) {
        use serde_json::Value;
        let Some(j) = self.json.as_mut() else {
            return;
        };
        if let Some(k) = key {
            j.name(k);
        }
        match v {
            Value::Object(m) => {
                j.begin('{');
                for (k, v) in m {
                    self.value(Some(k), v);
                }
                self.close_object();
            }
            Value::Array(a) => {
                j.start_array();
                for v in a {
                    self.value(None, v);
                }
                self.close_array();
            }
            Value::String(s) => j.string(s),
            // `jsonw_float`: "%g", as every `print_float` prints under `-j` (0.1, not 0.09999999986).
            Value::Number(n) if n.is_f64() => {
                j.value(&crate::util::fmt_g(n.as_f64().unwrap_or(0.0), 6))
            }
            other => j.value(&other.to_string()),
        }
    }
}

impl Write for Printer {
    /// `write!` on a printer is `fprintf`: see [`Printer::raw`].
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.raw(s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ShowFlags;

    fn json(pretty: bool) -> Printer {
        Printer::new(ShowFlags {
            json: true,
            pretty,
            ..Default::default()
        })
    }

    #[test]
    fn compact_json_keeps_order_and_repeated_keys() {
        // f_u32.c prints one "match" object per key into the same options object.
        let mut p = json(false);
        p.open_object(None);
        p.string("kind", "u32 ", "u32");
        p.number("pref", "pref 1 ", 1);
        p.open_object(Some("options"));
        for (v, off) in [("16", 20), ("a000000", 12)] {
            p.open_object(Some("match"));
            p.nl();
            p.string("value", "", v);
            p.number("off", "", off);
            p.close_object();
        }
        p.boolean("not_in_hw", "", true);
        p.close_object();
        p.close_object();
        assert_eq!(
            p.finish(),
            "[{\"kind\":\"u32\",\"pref\":1,\"options\":{\"match\":{\"value\":\"16\",\"off\":20},\
             \"match\":{\"value\":\"a000000\",\"off\":12},\"not_in_hw\":true}}]\n"
        );
    }

    #[test]
    fn appended_fields_print_what_their_formats_print() {
        // What tc's `%08x`, `%x`, `%u` and `%d` print in text, and print_hex/print_uint/print_int
        // in JSON (hex unpadded, as a string).
        let fields = |p: &mut Printer| {
            p.hex_parts("value", "  match ", 0x0a08_0001, true, "");
            p.hex_parts("mask", "/", 0, true, " ");
            p.hex_parts("big", "", 0xffff_ffff, true, " ");
            p.hex_parts("bkt", "bkt ", 0x7f, false, " ");
            p.uint("order", "order ", 2048, " ");
            p.int("off", "at ", -8, "");
            p.string_with("fh", " fh ", |s| s.push_str("800::\"a"), " ");
        };
        let mut p = Printer::new(ShowFlags::default());
        fields(&mut p);
        assert_eq!(
            p.finish(),
            "  match 0a080001/00000000 ffffffff bkt 7f order 2048 at -8 fh 800::\"a "
        );
        let mut p = json(false);
        fields(&mut p);
        assert_eq!(
            p.finish(),
            "[\"value\":\"a080001\",\"mask\":\"0\",\"big\":\"ffffffff\",\"bkt\":\"7f\",\
             \"order\":2048,\"off\":-8,\"fh\":\"800::\\\"a\"]\n"
        );
    }

    #[test]
    fn an_empty_listing_is_an_empty_array() {
        assert_eq!(json(false).finish(), "[]\n");
        assert_eq!(json(true).finish(), "[ ]\n");
    }

    #[test]
    fn pretty_json_is_json_writers_four_spaces() {
        // jsonw_name: a newline and the indentation before each key, ": " after it; jsonw_end: the
        // closing bracket on its own line when something was written inside.
        let mut p = json(true);
        p.open_object(None);
        p.string("dev", "", "v0");
        p.open_object(Some("options"));
        p.hex0x("handle", "", 5);
        p.close_object();
        p.close_object();
        assert_eq!(
            p.finish(),
            "[ {\n        \"dev\": \"v0\",\n        \"options\": {\n            \"handle\": \"0x5\"\n        }\n    } ]\n"
        );
    }

    #[test]
    fn text_takes_the_fragments_and_strings_are_escaped_in_json() {
        let mut p = Printer::new(ShowFlags::default());
        p.string("kind", "gact ", "gact");
        p.json_string("only", "json");
        p.nl();
        p.number("index", "\t index 1", 1);
        assert_eq!(p.finish(), "gact \n\t index 1");
        let mut p = json(false);
        p.string("s", "", "a\"b\\c\td");
        assert_eq!(p.finish(), "[\"s\":\"a\\\"b\\\\c\\td\"]\n");
    }
}
