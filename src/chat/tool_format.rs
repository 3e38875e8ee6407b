//! Gemma 4's tool syntax, both directions (spec §9.2).
//!
//! Values are written like JSON with three differences: strings are wrapped in `<|"|>`
//! instead of quotes and are not escaped, object keys in calls and responses are bare, and
//! keys are sorted. Declarations follow the shape of the model's published chat template.
//!
//! The reader ([`parse_arguments`]) accepts that syntax and also the near misses the model
//! is known to produce: JSON-quoted strings and keys, single-quoted strings, `key=value`,
//! Python's `True`/`False`/`None`, a missing closing `<|"|>` or closing brace at the end,
//! trailing commas and unquoted text values.

use serde_json::{Map, Number, Value};

use super::{Tool, ToolCall, ToolResponse};
use crate::{Error, Result};

/// Gemma 4's string delimiter, used on both sides of a string.
pub const STRING_DELIMITER: &str = "<|\"|>";
const Q: &str = STRING_DELIMITER;

/// Nesting deeper than this is refused rather than recursed into.
const MAX_DEPTH: usize = 64;

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Writes a value in Gemma 4 syntax. `quote_keys` wraps object keys in `<|"|>` (the form
/// used for values inside declarations); calls and responses use bare keys.
pub fn format_value(value: &Value, quote_keys: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, quote_keys);
    out
}

fn write_value(out: &mut String, value: &Value, quote_keys: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, quote_keys);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            write_fields(out, map, quote_keys);
            out.push('}');
        }
    }
}

/// `k:v,k:v` in sorted key order, without the braces.
fn write_fields(out: &mut String, map: &Map<String, Value>, quote_keys: bool) {
    for (i, (key, value)) in sorted_entries(map).into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if quote_keys {
            write_string(out, key);
        } else {
            out.push_str(key);
        }
        out.push(':');
        write_value(out, value, quote_keys);
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push_str(Q);
    out.push_str(s);
    out.push_str(Q);
}

/// Integral values print without a decimal point, whatever JSON type carried them.
fn write_number(out: &mut String, n: &Number) {
    match n.as_f64() {
        Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
            out.push_str(&(f as i64).to_string())
        }
        _ => out.push_str(&n.to_string()),
    }
}

/// Keys in the template's order: Jinja's `dictsort`, which ignores case.
fn sorted_entries(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.to_lowercase().cmp(&b.0.to_lowercase()).then(a.0.cmp(b.0)));
    entries
}

/// `<|tool_call>call:NAME{k:v,...}<tool_call|>`. Arguments must be an object or null.
pub fn format_tool_call(call: &ToolCall) -> Result<String> {
    let mut out = format!("<|tool_call>call:{}{{", call.name);
    match &call.arguments {
        Value::Null => {}
        Value::Object(map) => write_fields(&mut out, map, false),
        other => {
            return Err(Error::Input(format!(
                "tool call {:?}: arguments must be a JSON object, got {other}",
                call.name
            )));
        }
    }
    out.push_str("}<tool_call|>");
    Ok(out)
}

/// `<|tool_response>response:NAME{...}<tool_response|>`: an object's fields, or
/// `value:` and the value for anything else.
pub fn format_tool_response(response: &ToolResponse) -> String {
    let name = if response.name.is_empty() { "unknown" } else { &response.name };
    let mut out = format!("<|tool_response>response:{name}{{");
    match &response.response {
        Value::Object(map) => write_fields(&mut out, map, false),
        other => {
            out.push_str("value:");
            write_value(&mut out, other, false);
        }
    }
    out.push_str("}<tool_response|>");
    out
}

/// `<|tool>declaration:NAME{description:...,parameters:{...}}<tool|>`.
///
/// Follows the published template's `format_function_declaration`, except that the
/// `parameters` block is always closed and comma-separated (the template only closes it
/// when a `type` is present).
pub fn format_tool_declaration(tool: &Tool) -> String {
    let mut out = format!("<|tool>declaration:{}{{description:", tool.name);
    write_string(&mut out, &tool.description);
    if truthy(&tool.parameters) {
        let params = &tool.parameters;
        let mut parts = Vec::new();
        if let Some(props) = params.get("properties").and_then(Value::as_object)
            && !props.is_empty()
        {
            parts.push(format!("properties:{{{}}}", declared_properties(props, false)));
        }
        if let Some(required) = params.get("required")
            && truthy(required)
        {
            parts.push(format!("required:{}", required_list(required)));
        }
        if let Some(ty) = params.get("type")
            && truthy(ty)
        {
            parts.push(format!("type:{Q}{}{Q}", type_name(Some(ty))));
        }
        out.push_str(",parameters:{");
        out.push_str(&parts.join(","));
        out.push('}');
    }
    out.push_str("}<tool|>");
    out
}

/// Keys the template treats as schema keywords rather than property names.
const SCHEMA_KEYS: [&str; 5] = ["description", "type", "properties", "required", "nullable"];

/// The template's `format_parameters`: one `name:{...}` per property, sorted. With
/// `skip_schema_keys`, an object's own fields are read as its properties.
fn declared_properties(props: &Map<String, Value>, skip_schema_keys: bool) -> String {
    let mut rendered = Vec::new();
    for (key, value) in sorted_entries(props) {
        if skip_schema_keys && SCHEMA_KEYS.contains(&key.as_str()) {
            continue;
        }
        // Non-object entries are not properties; the template would print junk for them.
        let Some(prop) = value.as_object() else {
            continue;
        };
        let ty = type_name(prop.get("type"));
        let mut parts = Vec::new();
        if let Some(desc) = prop.get("description")
            && truthy(desc)
        {
            parts.push(format!("description:{Q}{}{Q}", plain_text(desc)));
        }
        match ty.as_str() {
            "STRING" => {
                if let Some(values) = prop.get("enum")
                    && truthy(values)
                {
                    parts.push(format!("enum:{}", format_value(values, true)));
                }
            }
            "ARRAY" => {
                if let Some(items) = prop.get("items").and_then(Value::as_object)
                    && !items.is_empty()
                {
                    parts.push(format!("items:{{{}}}", declared_items(items)));
                }
            }
            _ => {}
        }
        if prop.get("nullable").is_some_and(truthy) {
            parts.push("nullable:true".to_string());
        }
        if ty == "OBJECT" {
            let nested = match prop.get("properties").and_then(Value::as_object) {
                Some(nested) => declared_properties(nested, false),
                None => declared_properties(prop, true),
            };
            parts.push(format!("properties:{{{nested}}}"));
            if let Some(required) = prop.get("required")
                && truthy(required)
            {
                parts.push(format!("required:{}", required_list(required)));
            }
        }
        parts.push(format!("type:{Q}{ty}{Q}"));
        rendered.push(format!("{key}:{{{}}}", parts.join(",")));
    }
    rendered.join(",")
}

/// The template's rendering of an array property's `items` schema.
fn declared_items(items: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    for (key, value) in sorted_entries(items) {
        if value.is_null() {
            continue;
        }
        parts.push(match key.as_str() {
            "properties" => {
                let inner = value.as_object().map(|p| declared_properties(p, false));
                format!("properties:{{{}}}", inner.unwrap_or_default())
            }
            "required" => format!("required:{}", required_list(value)),
            "type" => match value {
                Value::Array(names) => {
                    let upper: Vec<Value> =
                        names.iter().map(|n| Value::String(plain_text(n).to_uppercase())).collect();
                    format!("type:{}", format_value(&Value::Array(upper), true))
                }
                other => format!("type:{Q}{}{Q}", plain_text(other).to_uppercase()),
            },
            _ => format!("{key}:{}", format_value(value, true)),
        });
    }
    parts.join(",")
}

fn required_list(required: &Value) -> String {
    let names: Vec<String> = match required {
        Value::Array(items) => items.iter().map(|i| format!("{Q}{}{Q}", plain_text(i))).collect(),
        _ => Vec::new(),
    };
    format!("[{}]", names.join(","))
}

/// The template's `value['type'] | upper`: a string upper-cased; a list prints as Python
/// would print it (`['STRING', 'NULL']`), upper-cased; a missing type is empty.
fn type_name(ty: Option<&Value>) -> String {
    match ty {
        None | Some(Value::Null) => String::new(),
        Some(Value::Array(items)) => {
            let names: Vec<String> =
                items.iter().map(|i| format!("'{}'", plain_text(i).to_uppercase())).collect();
            format!("[{}]", names.join(", "))
        }
        Some(other) => plain_text(other).to_uppercase(),
    }
}

/// A value as a template prints it inline: strings raw, anything else as JSON.
fn plain_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Jinja truthiness.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Parses the text between `<|tool_call>` and `<tool_call|>`: `call:NAME{args}`.
/// A call without a `{...}` has no arguments.
pub fn parse_tool_call(body: &str) -> Result<ToolCall> {
    let body = body.trim();
    let rest = body.strip_prefix("call:").unwrap_or(body);
    let (name, args) = match rest.find('{') {
        Some(i) => (rest[..i].trim(), &rest[i..]),
        None => (rest.trim(), ""),
    };
    let valid_name = !name.is_empty()
        && name.chars().all(|c| !c.is_whitespace() && !c.is_control() && !"<>{}[]:,".contains(c));
    if !valid_name {
        return Err(Error::Input(format!("tool call has no valid function name: {body:?}")));
    }
    let arguments =
        if args.is_empty() { Value::Object(Map::new()) } else { parse_arguments(args)? };
    Ok(ToolCall { name: name.to_string(), arguments })
}

/// Parses a `{...}` argument object into JSON.
pub fn parse_arguments(text: &str) -> Result<Value> {
    let mut reader = Reader { s: text, pos: 0, depth: 0 };
    reader.skip_ws();
    if !reader.eat("{") {
        return Err(reader.error("arguments must start with '{'"));
    }
    let value = reader.object()?;
    // Stray closers after a complete object are noise, anything else is not.
    let rest = &text[reader.pos..];
    if rest.chars().all(|c| c.is_whitespace() || c == '}' || c == ']') {
        Ok(value)
    } else {
        Err(reader.error("unexpected text after the arguments"))
    }
}

struct Reader<'a> {
    s: &'a str,
    pos: usize,
    /// Containers open around the current position.
    depth: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, token: &str) -> bool {
        let found = self.rest().starts_with(token);
        if found {
            self.pos += token.len();
        }
        found
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn error(&self, what: &str) -> Error {
        Error::Input(format!("malformed tool call arguments at byte {}: {what}", self.pos))
    }

    /// After `{`. A missing `}` at the end of the text is accepted.
    fn object(&mut self) -> Result<Value> {
        self.enter()?;
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => break,
                Some('}') => {
                    self.pos += 1;
                    break;
                }
                Some(',') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => {}
            }
            let key = self.key()?;
            self.skip_ws();
            if !(self.eat(":") || self.eat("=")) {
                return Err(self.error("expected ':' after a key"));
            }
            let value = self.value()?;
            map.insert(key, value);
            self.skip_ws();
            match self.peek() {
                None | Some(',') | Some('}') => {}
                Some(_) => return Err(self.error("expected ',' or '}'")),
            }
        }
        self.depth -= 1;
        Ok(Value::Object(map))
    }

    /// After `[`. A missing `]` at the end of the text is accepted.
    fn array(&mut self) -> Result<Value> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => break,
                Some(']') => {
                    self.pos += 1;
                    break;
                }
                Some(',') => {
                    self.pos += 1;
                    continue;
                }
                Some(_) => {}
            }
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                None | Some(',') | Some(']') => {}
                Some(_) => return Err(self.error("expected ',' or ']'")),
            }
        }
        self.depth -= 1;
        Ok(Value::Array(items))
    }

    fn enter(&mut self) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        self.depth += 1;
        Ok(())
    }

    fn key(&mut self) -> Result<String> {
        if let Some(s) = self.quoted()? {
            return Ok(s);
        }
        let rest = self.rest();
        let len = rest
            .find(|c: char| c.is_whitespace() || ":=,{}[]\"'<".contains(c))
            .unwrap_or(rest.len());
        if len == 0 {
            return Err(self.error("expected a key"));
        }
        self.pos += len;
        Ok(rest[..len].to_string())
    }

    fn value(&mut self) -> Result<Value> {
        self.skip_ws();
        if let Some(s) = self.quoted()? {
            return Ok(Value::String(s));
        }
        match self.peek() {
            Some('{') => {
                self.pos += 1;
                self.object()
            }
            Some('[') => {
                self.pos += 1;
                self.array()
            }
            _ => self.bare(),
        }
    }

    /// A string in any of the accepted quotings, or None when none starts here.
    fn quoted(&mut self) -> Result<Option<String>> {
        if self.eat(Q) {
            return Ok(Some(self.delimited()));
        }
        match self.peek() {
            Some('"') => self.json_string().map(Some),
            Some('\'') => self.single_quoted().map(Some),
            _ => Ok(None),
        }
    }

    /// After an opening `<|"|>`. Without a closing delimiter the string runs to the end of
    /// the text, less trailing space and the closers of the containers still open.
    fn delimited(&mut self) -> String {
        let rest = self.rest();
        if let Some(end) = rest.find(Q) {
            self.pos += end + Q.len();
            return rest[..end].to_string();
        }
        let mut end = rest.trim_end().len();
        let mut closers = self.depth;
        while closers > 0 && end > 0 && matches!(rest.as_bytes()[end - 1], b'}' | b']') {
            end = rest[..end - 1].trim_end().len();
            closers -= 1;
        }
        self.pos += end;
        rest[..end].to_string()
    }

    fn json_string(&mut self) -> Result<String> {
        let rest = self.rest();
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    let literal = &rest[..=i];
                    let s = serde_json::from_str::<String>(literal)
                        .map_err(|e| self.error(&format!("bad quoted string: {e}")))?;
                    self.pos += i + 1;
                    return Ok(s);
                }
                _ => escaped = false,
            }
        }
        Err(self.error("unterminated quoted string"))
    }

    /// `'text'`; `\'` stands for a quote. A `<|"|>` right after the closing quote is a
    /// known slip and is dropped.
    fn single_quoted(&mut self) -> Result<String> {
        let rest = self.rest();
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1).peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' if chars.peek().is_some_and(|&(_, n)| n == '\'') => {
                    out.push('\'');
                    chars.next();
                }
                '\'' => {
                    self.pos += i + 1;
                    self.eat(Q);
                    return Ok(out);
                }
                _ => out.push(c),
            }
        }
        Err(self.error("unterminated single-quoted string"))
    }

    /// An unquoted value: a number, a literal, or (as a repair) plain text up to the next
    /// `,` or closer.
    fn bare(&mut self) -> Result<Value> {
        let rest = self.rest();
        let len = rest.find([',', '}', ']']).unwrap_or(rest.len());
        let token = rest[..len].trim();
        if token.is_empty() {
            return Err(self.error("expected a value"));
        }
        self.pos += len;
        Ok(match token {
            "true" | "True" => Value::Bool(true),
            "false" | "False" => Value::Bool(false),
            "null" | "None" => Value::Null,
            _ => number(token).unwrap_or_else(|| Value::String(token.to_string())),
        })
    }
}

fn number(token: &str) -> Option<Value> {
    if !token.bytes().all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) {
        return None;
    }
    if let Ok(i) = token.parse::<i64>() {
        return Some(Value::from(i));
    }
    if let Ok(u) = token.parse::<u64>() {
        return Some(Value::from(u));
    }
    let f = token.parse::<f64>().ok()?;
    Number::from_f64(f).map(Value::Number)
}
