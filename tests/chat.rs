//! Prompt renderers and the Gemma 4 output parser.
//!
//! Expected prompts are written by hand from spec §9 and the published chat templates.
//! Cases marked "template reference" reproduce outputs of the Gemma 4 Jinja templates as
//! recorded in Ollama's renderer reference tests (rendered there with Python's jinja2);
//! the Gemma 3 reference is the upstream Gemma 3 template's documented output.

use proptest::prelude::*;
use rullama::chat::{
    Event, Message, Parser, RenderOptions, Role, Template, Tool, ToolCall, ToolResponse,
    format_tool_call, format_tool_declaration, format_value, parse_arguments, parse_tool_call,
};
use serde_json::{Value, json};

const Q: &str = "<|\"|>";

fn q(s: &str) -> String {
    format!("{Q}{s}{Q}")
}

fn opts() -> RenderOptions {
    RenderOptions::default()
}

fn thinking() -> RenderOptions {
    RenderOptions { thinking: true, ..RenderOptions::default() }
}

fn with_tools(tools: Vec<Tool>) -> RenderOptions {
    RenderOptions { tools, ..RenderOptions::default() }
}

fn small(messages: &[Message], options: &RenderOptions) -> String {
    Template::Gemma4Small.render(messages, options).unwrap()
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall { name: name.into(), arguments }
}

fn assistant_calls(calls: Vec<ToolCall>) -> Message {
    Message { role: Role::Assistant, tool_calls: calls, ..Default::default() }
}

fn tool_text(content: &str) -> Message {
    Message::new(Role::Tool, content)
}

fn tool(value: Value) -> Tool {
    Tool::from_json(&value).unwrap()
}

fn bash_tool() -> Tool {
    tool(json!({"type": "function", "function": {
        "name": "bash", "description": "Run a command",
        "parameters": {"type": "object", "required": ["command"],
            "properties": {"command": {"type": "string", "description": "The command"}}}}}))
}

fn bash_decl() -> String {
    format!(
        "<|tool>declaration:bash{{description:{},parameters:{{properties:{{command:{{description:{},type:{}}}}},required:[{}],type:{}}}}}<tool|>",
        q("Run a command"),
        q("The command"),
        q("STRING"),
        q("command"),
        q("OBJECT")
    )
}

// ------------------------------------------------------------------------------------
// Gemma 4 turns
// ------------------------------------------------------------------------------------

#[test]
fn gemma4_system_user_assistant_user() {
    // Template reference "multi_turn".
    let messages = [
        Message::system("You are helpful."),
        Message::user("Hi"),
        Message::assistant("Hello!"),
        Message::user("More"),
    ];
    assert_eq!(
        small(&messages, &opts()),
        "<bos><|turn>system\nYou are helpful.<turn|>\n\
         <|turn>user\nHi<turn|>\n\
         <|turn>model\nHello!<turn|>\n\
         <|turn>user\nMore<turn|>\n\
         <|turn>model\n"
    );
}

#[test]
fn gemma4_without_generation_prompt() {
    let options = RenderOptions { add_generation_prompt: false, ..opts() };
    let messages = [Message::user("Hi"), Message::assistant("Hello!")];
    assert_eq!(
        small(&messages, &options),
        "<bos><|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
    );
}

#[test]
fn gemma4_trims_text_and_reads_developer_as_system() {
    let developer: Message =
        serde_json::from_value(json!({"role": "developer", "content": "  Be terse.\n"})).unwrap();
    assert_eq!(developer.role, Role::System);
    let messages = [developer, Message::user("  hello  ")];
    assert_eq!(
        small(&messages, &opts()),
        "<bos><|turn>system\nBe terse.<turn|>\n<|turn>user\nhello<turn|>\n<|turn>model\n"
    );
}

#[test]
fn gemma4_thinking_on_opens_system_turn() {
    // Template references "thinking_no_system" and "thinking_system".
    assert_eq!(
        small(&[Message::user("Hi")], &thinking()),
        "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    );
    assert_eq!(
        small(&[Message::system("You are helpful."), Message::user("Hi")], &thinking()),
        "<bos><|turn>system\n<|think|>\nYou are helpful.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n"
    );
}

#[test]
fn gemma4_large_adds_empty_thought_when_thinking_off() {
    let messages = [Message::user("Hello")];
    assert_eq!(
        Template::Gemma4Large.render(&messages, &opts()).unwrap(),
        "<bos><|turn>user\nHello<turn|>\n<|turn>model\n<|channel>thought\n<channel|>"
    );
    assert_eq!(
        Template::Gemma4Large.render(&messages, &thinking()).unwrap(),
        "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHello<turn|>\n<|turn>model\n"
    );
    assert_eq!(small(&messages, &opts()), "<bos><|turn>user\nHello<turn|>\n<|turn>model\n");
}

#[test]
fn gemma4_media_placeholders_precede_text() {
    let message = Message { images: 2, audios: 1, ..Message::user(" Describe these. ") };
    assert_eq!(
        small(&[message], &opts()),
        "<bos><|turn>user\n<|image|><|image|><|audio|>Describe these.<turn|>\n<|turn>model\n"
    );
}

#[test]
fn gemma4_strips_thought_spans_from_assistant_content() {
    // Template reference "multiple_thinking_blocks".
    let messages = [
        Message::user("Hi"),
        Message::assistant("<|channel>Think1<channel|>Middle<|channel>Think2<channel|>Done"),
        Message::user("More"),
    ];
    assert_eq!(
        small(&messages, &opts()),
        "<bos><|turn>user\nHi<turn|>\n<|turn>model\nMiddleDone<turn|>\n<|turn>user\nMore<turn|>\n<|turn>model\n"
    );
}

#[test]
fn gemma4_thinking_dropped_before_last_user_kept_after() {
    let old = Message { thinking: Some("old thought".into()), ..Message::assistant("4") };
    let recent = Message {
        thinking: Some("need the time".into()),
        ..assistant_calls(vec![call("clock", json!({}))])
    };
    let messages = [Message::user("2+2?"), old, Message::user("Time?"), recent, tool_text("12:00")];
    assert_eq!(
        small(&messages, &thinking()),
        format!(
            "<bos><|turn>system\n<|think|>\n<turn|>\n\
             <|turn>user\n2+2?<turn|>\n\
             <|turn>model\n4<turn|>\n\
             <|turn>user\nTime?<turn|>\n\
             <|turn>model\n<|channel>thought\nneed the time\n<channel|>\
             <|tool_call>call:clock{{}}<tool_call|>\
             <|tool_response>response:clock{{value:{}}}<tool_response|>\
             <|channel>thought\n",
            q("12:00")
        )
    );
}

// ------------------------------------------------------------------------------------
// Gemma 4 tools
// ------------------------------------------------------------------------------------

#[test]
fn gemma4_tool_declarations_in_system_turn() {
    // Template reference "system_tools".
    let messages = [Message::system("You are helpful."), Message::user("Hi")];
    assert_eq!(
        small(&messages, &with_tools(vec![bash_tool()])),
        format!(
            "<bos><|turn>system\nYou are helpful.{}<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n",
            bash_decl()
        )
    );
}

#[test]
fn tool_declaration_shapes() {
    // Template references: nestedDeclRef, arrayDeclRef, modeDeclRef, configureDeclRef,
    // nestedRequiredDeclRef, rawDeclRef, the union-type case and countDeclRef.
    let cases = [
        (
            json!({"name": "create", "description": "Create item", "parameters": {"type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Name"},
                    "config": {"type": "object", "description": "Config",
                        "properties": {"enabled": {"type": "boolean", "description": "On/off"}}}}}}),
            "<|tool>declaration:create{description:<|\"|>Create item<|\"|>,parameters:{properties:{config:{description:<|\"|>Config<|\"|>,properties:{enabled:{description:<|\"|>On/off<|\"|>,type:<|\"|>BOOLEAN<|\"|>}},type:<|\"|>OBJECT<|\"|>},name:{description:<|\"|>Name<|\"|>,type:<|\"|>STRING<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "batch", "description": "Run batch", "parameters": {"type": "object",
                "properties": {"commands": {"type": "array", "description": "Commands",
                    "items": {"type": "string"}}}}}),
            "<|tool>declaration:batch{description:<|\"|>Run batch<|\"|>,parameters:{properties:{commands:{description:<|\"|>Commands<|\"|>,items:{type:<|\"|>STRING<|\"|>},type:<|\"|>ARRAY<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "set_mode", "description": "Set mode", "parameters": {"type": "object",
                "properties": {"mode": {"type": "string", "description": "The mode",
                    "enum": ["fast", "slow"]}}}}),
            "<|tool>declaration:set_mode{description:<|\"|>Set mode<|\"|>,parameters:{properties:{mode:{description:<|\"|>The mode<|\"|>,enum:[<|\"|>fast<|\"|>,<|\"|>slow<|\"|>],type:<|\"|>STRING<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "configure", "description": "Configure", "parameters": {"type": "object",
                "properties": {"config": {"type": "object", "description": "Config"}}}}),
            "<|tool>declaration:configure{description:<|\"|>Configure<|\"|>,parameters:{properties:{config:{description:<|\"|>Config<|\"|>,properties:{},type:<|\"|>OBJECT<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "create_user", "description": "Create user", "parameters": {"type": "object",
                "properties": {"profile": {"type": "object", "description": "Profile",
                    "required": ["name"],
                    "properties": {"name": {"type": "string", "description": "Name"},
                                   "age": {"type": "number", "description": "Age"}}}}}}),
            "<|tool>declaration:create_user{description:<|\"|>Create user<|\"|>,parameters:{properties:{profile:{description:<|\"|>Profile<|\"|>,properties:{age:{description:<|\"|>Age<|\"|>,type:<|\"|>NUMBER<|\"|>},name:{description:<|\"|>Name<|\"|>,type:<|\"|>STRING<|\"|>}},required:[<|\"|>name<|\"|>],type:<|\"|>OBJECT<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "raw", "description": "Raw input", "parameters": {"type": "object"}}),
            "<|tool>declaration:raw{description:<|\"|>Raw input<|\"|>,parameters:{type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "maybe_name", "description": "Test nullable union", "parameters": {"type": "object",
                "properties": {"name": {"type": ["string", "null"], "description": "Name"}}}}),
            "<|tool>declaration:maybe_name{description:<|\"|>Test nullable union<|\"|>,parameters:{properties:{name:{description:<|\"|>Name<|\"|>,type:<|\"|>['STRING', 'NULL']<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
        (
            json!({"name": "count", "description": "Count items", "parameters": {"type": "object",
                "properties": {"n": {"type": "number"}}}}),
            "<|tool>declaration:count{description:<|\"|>Count items<|\"|>,parameters:{properties:{n:{type:<|\"|>NUMBER<|\"|>}},type:<|\"|>OBJECT<|\"|>}}<tool|>",
        ),
    ];
    for (declaration, expected) in cases {
        assert_eq!(format_tool_declaration(&tool(declaration)), expected);
    }
    // A declaration without parameters has only its description.
    assert_eq!(
        format_tool_declaration(&tool(json!({"name": "now"}))),
        "<|tool>declaration:now{description:<|\"|><|\"|>}<tool|>"
    );
}

#[test]
fn gemma4_tool_call_and_response() {
    // Template reference "tool_call_response": after results with no text the model turn
    // stays open, and no generation prompt follows.
    let messages = [
        Message::system("You are helpful."),
        Message::user("List files"),
        assistant_calls(vec![call("bash", json!({"command": "ls"}))]),
        tool_text("file1.txt\nfile2.txt"),
    ];
    let expected = format!(
        "<bos><|turn>system\nYou are helpful.{}<turn|>\n\
         <|turn>user\nList files<turn|>\n\
         <|turn>model\n<|tool_call>call:bash{{command:{}}}<tool_call|>\
         <|tool_response>response:bash{{value:{}}}<tool_response|>",
        bash_decl(),
        q("ls"),
        q("file1.txt\nfile2.txt")
    );
    let options = with_tools(vec![bash_tool()]);
    assert_eq!(small(&messages, &options), expected);

    // The same result given as a named tool response, or on the assistant message itself.
    let named = Message::tool_result("bash", json!("file1.txt\nfile2.txt"));
    let messages_named = [messages[0].clone(), messages[1].clone(), messages[2].clone(), named];
    assert_eq!(small(&messages_named, &options), expected);
    let inline = Message {
        tool_responses: vec![ToolResponse {
            name: "bash".into(),
            response: json!("file1.txt\nfile2.txt"),
        }],
        ..messages[2].clone()
    };
    assert_eq!(small(&[messages[0].clone(), messages[1].clone(), inline], &options), expected);
}

#[test]
fn gemma4_full_tool_round_trip() {
    // Template reference "full_round_trip" (tools omitted from the system turn here).
    let messages = [
        Message::user("List files"),
        assistant_calls(vec![call("bash", json!({"command": "ls"}))]),
        tool_text("file1.txt"),
        Message::assistant("Here are the files."),
        Message::user("Read file1.txt"),
    ];
    assert_eq!(
        small(&messages, &opts()),
        format!(
            "<bos><|turn>user\nList files<turn|>\n\
             <|turn>model\n<|tool_call>call:bash{{command:{}}}<tool_call|>\
             <|tool_response>response:bash{{value:{}}}<tool_response|>\
             Here are the files.<turn|>\n\
             <|turn>user\nRead file1.txt<turn|>\n\
             <|turn>model\n",
            q("ls"),
            q("file1.txt")
        )
    );
}

#[test]
fn gemma4_calls_without_responses_end_with_tool_response() {
    // Template reference "tool_call_pending_response": calls come before the text.
    let pending = Message {
        tool_calls: vec![call("bash", json!({"command": "ls"}))],
        ..Message::assistant("Let me check.")
    };
    let messages = [Message::user("List files"), pending];
    assert_eq!(
        small(&messages, &opts()),
        format!(
            "<bos><|turn>user\nList files<turn|>\n<|turn>model\n<|tool_call>call:bash{{command:{}}}<tool_call|>Let me check.<|tool_response>",
            q("ls")
        )
    );
}

#[test]
fn gemma4_adjacent_assistants_share_a_model_turn() {
    // Template reference "canonical tool continuations" (small and 31B variants).
    let checking = Message {
        tool_calls: vec![call("bash", json!({"command": null}))],
        ..Message::assistant("Checking.")
    };
    let messages = [
        Message::user("Use the tool"),
        Message::assistant("First."),
        checking,
        tool_text("done"),
        Message::assistant("Done."),
        Message::user("Next"),
    ];
    let base = format!(
        "<bos><|turn>user\nUse the tool<turn|>\n\
         <|turn>model\nFirst.<|tool_call>call:bash{{command:null}}<tool_call|>\
         <|tool_response>response:bash{{value:{}}}<tool_response|>\
         Checking.Done.<turn|>\n\
         <|turn>user\nNext<turn|>\n<|turn>model\n",
        q("done")
    );
    assert_eq!(small(&messages, &opts()), base);
    assert_eq!(
        Template::Gemma4Large.render(&messages, &opts()).unwrap(),
        base + "<|channel>thought\n<channel|>"
    );
}

#[test]
fn gemma4_responses_follow_calls_by_position() {
    let messages = [
        Message::user("Both"),
        assistant_calls(vec![call("a", json!({"x": 1})), call("b", json!({"y": true}))]),
        tool_text("one"),
        Message::tool_result("b", json!({"ok": true, "n": 2.0})),
        Message::user("Thanks"),
    ];
    assert_eq!(
        small(&messages, &opts()),
        format!(
            "<bos><|turn>user\nBoth<turn|>\n\
             <|turn>model\n<|tool_call>call:a{{x:1}}<tool_call|><|tool_call>call:b{{y:true}}<tool_call|>\
             <|tool_response>response:a{{value:{}}}<tool_response|>\
             <|tool_response>response:b{{n:2,ok:true}}<tool_response|>\
             <turn|>\n<|turn>user\nThanks<turn|>\n<|turn>model\n",
            q("one")
        )
    );
}

#[test]
fn tool_call_formatting() {
    // Keys sorted, bare keys at every level, strings delimited, integers bare.
    let c = call(
        "configure",
        json!({"zeta": "last", "alpha": {"db": {"port": 5432.0, "host": "localhost"}},
               "list": ["a", 1, true, null, 2.5]}),
    );
    assert_eq!(
        format_tool_call(&c).unwrap(),
        "<|tool_call>call:configure{alpha:{db:{host:<|\"|>localhost<|\"|>,port:5432}},list:[<|\"|>a<|\"|>,1,true,null,2.5],zeta:<|\"|>last<|\"|>}<tool_call|>"
    );
    assert_eq!(
        format_tool_call(&call("f", Value::Null)).unwrap(),
        "<|tool_call>call:f{}<tool_call|>"
    );
    assert!(format_tool_call(&call("f", json!("{\"a\":1}"))).is_err());
    // Inside declarations, map keys are delimited too.
    assert_eq!(format_value(&json!({"k": -2}), true), "{<|\"|>k<|\"|>:-2}");
}

// ------------------------------------------------------------------------------------
// Gemma 3
// ------------------------------------------------------------------------------------

#[test]
fn gemma3_system_prompt_joins_first_user_turn() {
    let messages = [Message::system("Be helpful."), Message::user("Hello")];
    assert_eq!(
        Template::Gemma3.render(&messages, &opts()).unwrap(),
        "<bos><start_of_turn>user\nBe helpful.\n\nHello<end_of_turn>\n<start_of_turn>model\n"
    );
}

#[test]
fn gemma3_multi_turn() {
    let messages = [
        Message::user(" Hi "),
        Message::assistant("Hello!\n"),
        Message { images: 1, ..Message::user("What is this?") },
    ];
    assert_eq!(
        Template::Gemma3.render(&messages, &thinking()).unwrap(),
        "<bos><start_of_turn>user\nHi<end_of_turn>\n\
         <start_of_turn>model\nHello!<end_of_turn>\n\
         <start_of_turn>user\n<start_of_image>What is this?<end_of_turn>\n\
         <start_of_turn>model\n"
    );
    let no_prompt = RenderOptions { add_generation_prompt: false, ..opts() };
    assert_eq!(
        Template::Gemma3.render(&messages[..2], &no_prompt).unwrap(),
        "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
    );
}

#[test]
fn gemma3_refuses_what_it_cannot_express() {
    let gemma3 = Template::Gemma3;
    assert!(gemma3.render(&[Message::user("a"), Message::user("b")], &opts()).is_err());
    assert!(gemma3.render(&[Message::assistant("a")], &opts()).is_err());
    assert!(gemma3.render(&[Message::user("a")], &with_tools(vec![bash_tool()])).is_err());
    assert!(gemma3.render(&[Message { audios: 1, ..Message::user("a") }], &opts()).is_err());
}

// ------------------------------------------------------------------------------------
// Template choice
// ------------------------------------------------------------------------------------

#[test]
fn template_for_model() {
    use Template::*;
    let pick = |arch, name, params| Template::for_model(arch, name, params).unwrap();
    assert_eq!(pick("gemma3", "gemma3:270m", None), Gemma3);
    assert_eq!(pick("gemma4", "gemma4:e2b", Some(5_100_000_000)), Gemma4Small);
    assert_eq!(pick("gemma4", "gemma4:E4B-it-qat", None), Gemma4Small);
    assert_eq!(pick("gemma4", "gemma4:12b", None), Gemma4Large);
    assert_eq!(pick("gemma4", "gemma4:26b", None), Gemma4Large);
    assert_eq!(pick("gemma4", "gemma4:31b-cloud", None), Gemma4Large);
    assert_eq!(pick("gemma4", "mygemma", Some(11_900_000_000)), Gemma4Large);
    assert_eq!(pick("gemma4", "mygemma", Some(8_000_000_000)), Gemma4Small);
    assert_eq!(pick("gemma4", "", None), Gemma4Small);
    assert!(Template::for_model("llama", "llama3", None).is_err());
    assert_eq!(Gemma4Small.stop_strings()[0], "<turn|>");
    assert_eq!(Gemma3.stop_strings(), ["<end_of_turn>"]);
}

// ------------------------------------------------------------------------------------
// Parser
// ------------------------------------------------------------------------------------

/// Parses `text` fed in the given pieces and merges adjacent events of a kind.
fn parse_chunks(chunks: &[&str], parser: Parser) -> Vec<Event> {
    let mut parser = parser;
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(parser.feed(chunk));
    }
    events.extend(parser.finish());
    merge(events)
}

fn parse(text: &str) -> Vec<Event> {
    parse_chunks(&[text], Parser::new())
}

fn merge(events: Vec<Event>) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for event in events {
        match (out.last_mut(), event) {
            (Some(Event::Content(a)), Event::Content(b)) => a.push_str(&b),
            (Some(Event::Thinking(a)), Event::Thinking(b)) => a.push_str(&b),
            (_, e) => out.push(e),
        }
    }
    out
}

/// Every way of cutting `text` into two or three pieces at char boundaries.
fn all_splits(text: &str) -> Vec<Vec<&str>> {
    let cuts: Vec<usize> = (0..=text.len()).filter(|&i| text.is_char_boundary(i)).collect();
    let mut out = Vec::new();
    for &a in &cuts {
        for &b in cuts.iter().filter(|&&b| b >= a) {
            out.push(vec![&text[..a], &text[a..b], &text[b..]]);
        }
    }
    out
}

fn content(s: &str) -> Event {
    Event::Content(s.into())
}

fn thought(s: &str) -> Event {
    Event::Thinking(s.into())
}

#[test]
fn parser_thinking_split_anywhere() {
    let text = "<|channel>thought\n Let me think.\n<channel|>\n\nThe answer is 4.<turn|>";
    let expected = vec![thought("Let me think."), content("The answer is 4.")];
    assert_eq!(parse(text), expected);
    for chunks in all_splits(text) {
        assert_eq!(parse_chunks(&chunks, Parser::new()), expected, "chunks {chunks:?}");
    }
    // Token-by-token, the way a runtime feeds it.
    let pieces = [
        "<|channel>",
        "thought",
        "\n",
        "Let",
        " me",
        " think.",
        "\n",
        "<channel|>",
        "The",
        " answer is 4.",
    ];
    assert_eq!(parse_chunks(&pieces, Parser::new()), expected);
}

#[test]
fn parser_streams_content_without_waiting_for_the_end() {
    let mut parser = Parser::new();
    assert_eq!(parser.feed("Hello wor"), vec![content("Hello wor")]);
    // A possible tag, and the space before it, wait for the next piece.
    assert_eq!(parser.feed("ld <|chan"), vec![content("ld")]);
    assert_eq!(parser.feed("nel>thought\nhmm "), vec![thought("hmm")]);
    assert_eq!(parser.feed("<channel|>ok"), vec![content("ok")]);
    assert_eq!(parser.finish(), vec![]);
}

#[test]
fn parser_tool_call_to_json() {
    let text = "Checking.<|tool_call>call:get_weather{city:<|\"|>Paris, France<|\"|>,days:3,metric:true,note:null}<tool_call|>";
    let expected = vec![
        content("Checking."),
        Event::ToolCall(call(
            "get_weather",
            json!({"city": "Paris, France", "days": 3, "metric": true, "note": null}),
        )),
    ];
    assert_eq!(parse(text), expected);
    for chunks in all_splits(text) {
        assert_eq!(parse_chunks(&chunks, Parser::new()), expected, "chunks {chunks:?}");
    }
}

#[test]
fn parser_nested_arguments() {
    let text = "<|tool_call>call:plan{steps:[{name:<|\"|>a{b}<|\"|>,tags:[<|\"|>x<|\"|>,<|\"|>y<|\"|>]},{name:<|\"|>c<|\"|>,n:-1.5e2}],cfg:{deep:{deeper:{v:<|\"|>text with <tool_call|> inside<|\"|>}}}}<tool_call|>";
    assert_eq!(
        parse(text),
        vec![Event::ToolCall(call(
            "plan",
            json!({"steps": [{"name": "a{b}", "tags": ["x", "y"]}, {"name": "c", "n": -150.0}],
                   "cfg": {"deep": {"deeper": {"v": "text with <tool_call|> inside"}}}})
        ))]
    );
}

#[test]
fn parser_several_calls_and_stray_tags() {
    let text = "<|tool_call>call:a{}<tool_call|><tool_call|>\n<|tool_call>call:b{x:1}<tool_call|><|tool_response>response:b{value:1}<tool_response|>hallucinated";
    assert_eq!(
        parse(text),
        vec![Event::ToolCall(call("a", json!({}))), Event::ToolCall(call("b", json!({"x": 1})))]
    );
}

#[test]
fn parser_call_without_close_tag() {
    // The braces balance, so the call ends there; text after it is content.
    assert_eq!(
        parse("<|tool_call>call:f{a:1} Done."),
        vec![Event::ToolCall(call("f", json!({"a": 1}))), content("Done.")]
    );
    // Cut off by the end of generation.
    assert_eq!(parse("<|tool_call>call:f{a:1"), vec![Event::ToolCall(call("f", json!({"a": 1})))]);
}

#[test]
fn parser_repairs_known_slips() {
    let cases = [
        ("call:f{a:<|\"|>x}", json!({"a": "x"})),
        ("call:f{a:'it\\'s'}", json!({"a": "it's"})),
        ("call:f{key='x'}", json!({"key": "x"})),
        ("call:f{a:'x'<|\"|>,b:2}", json!({"a": "x", "b": 2})),
        ("call:f{\"a\":\"q\\\"uote\",b:[1,2,]}", json!({"a": "q\"uote", "b": [1, 2]})),
        (
            "call:f{flag:True,none:None,city:Paris}",
            json!({"flag": true, "none": null, "city": "Paris"}),
        ),
        ("call:f{a:{b:<|\"|>deep}}", json!({"a": {"b": "deep"}})),
        ("call:now", json!({})),
    ];
    for (body, expected) in cases {
        let parsed = parse_tool_call(body).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(parsed.arguments, expected, "{body}");
        let streamed = parse(&format!("<|tool_call>{body}<tool_call|>"));
        assert_eq!(streamed, vec![Event::ToolCall(parsed)], "{body}");
    }
}

#[test]
fn parser_unreadable_call_comes_back_as_content() {
    assert!(parse_tool_call("call:{a:1}").is_err());
    assert!(parse_arguments("{a 1}").is_err());
    assert_eq!(
        parse("<|tool_call>call:{a:1}<tool_call|>"),
        vec![content("<|tool_call>call:{a:1}<tool_call|>")]
    );
}

#[test]
fn parser_turn_end_is_stripped() {
    assert_eq!(parse("Hi there.\n<turn|>"), vec![content("Hi there.")]);
    assert_eq!(parse("Hi<turn|>ignored"), vec![content("Hi")]);
    assert_eq!(parse("<|channel>thought\nunfinished<turn|>"), vec![thought("unfinished")]);
}

#[test]
fn parser_after_prompt_with_open_thought() {
    let tools = with_tools(vec![bash_tool()]);
    let options = RenderOptions { thinking: true, ..tools };
    let messages = [
        Message::user("Go"),
        assistant_calls(vec![call("bash", json!({"command": "ls"}))]),
        tool_text("ok"),
    ];
    let prompt = small(&messages, &options);
    assert!(prompt.ends_with("<tool_response|><|channel>thought\n"), "{prompt}");
    assert_eq!(
        parse_chunks(&["The listing", " is short.<channel|>Only ok."], Parser::for_prompt(&prompt)),
        vec![thought("The listing is short."), content("Only ok.")]
    );
    // The large template's empty thought is already closed.
    let large = Template::Gemma4Large.render(&[Message::user("Hi")], &opts()).unwrap();
    assert_eq!(parse_chunks(&["Hello"], Parser::for_prompt(&large)), vec![content("Hello")]);
}

#[test]
fn parser_malformed_inputs_do_not_panic() {
    let nasty = [
        "<|tool_call>",
        "<|tool_call>call:",
        "<|tool_call>call:f{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{",
        "<|tool_call>call:f[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[}",
        "<|tool_call>call:f{a:<|\"|>",
        "<|tool_call>call:f{a:\"\\",
        "<|tool_call>call:f{a:'é",
        "<|tool_call>call:f{é:ü}}}]]]<tool_call|><tool_call|",
        "<|channel>",
        "<|channel>thou",
        "<channel|><|channel><channel|><|tool_call><tool_call|><turn|>",
        "<|\"|><|\"|><|\"|>",
        "<|tool_call>call:f{a:<|\"|>x<tool_call|>y",
    ];
    for text in nasty {
        let _ = parse(text);
        for chunks in all_splits(text) {
            let _ = parse_chunks(&chunks, Parser::new());
        }
    }
}

// ------------------------------------------------------------------------------------
// Properties
// ------------------------------------------------------------------------------------

/// Pieces of near-tags and ordinary text.
fn near_tag() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("<|\"|>".to_string()),
        Just("thought\n".to_string()),
        Just("call:f{".to_string()),
        Just("<|chan".to_string()),
        Just("<tool_c".to_string()),
        Just("<tur".to_string()),
        "[a-z:{}\\[\\],'\"=<|> \n\t.0-9é€-]{0,6}",
    ]
}

/// Near-tags, ordinary text and complete tags.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(TAGS.to_vec()).prop_map(String::from),
        2 => near_tag(),
    ]
}

fn tagged_text() -> impl Strategy<Value = String> {
    prop::collection::vec(fragment(), 0..24).prop_map(|v| v.concat())
}

fn untagged_text() -> impl Strategy<Value = String> {
    prop_oneof![prop::collection::vec(near_tag(), 0..24).prop_map(|v| v.concat()), any::<String>(),]
}

const TAGS: [&str; 6] =
    ["<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<turn|>"];

/// Cuts `text` at the given fractions (snapped to char boundaries).
fn cut(text: &str, fractions: &[f64]) -> Vec<String> {
    let mut points: Vec<usize> = fractions
        .iter()
        .map(|f| {
            let mut i = (f * text.len() as f64) as usize;
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        })
        .collect();
    points.sort_unstable();
    let mut pieces = Vec::new();
    let mut last = 0;
    for p in points {
        pieces.push(text[last..p].to_string());
        last = p;
    }
    pieces.push(text[last..].to_string());
    pieces
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parsing_does_not_depend_on_chunking(
        text in tagged_text(),
        fractions in prop::collection::vec(0.0f64..1.0, 0..8),
    ) {
        let pieces = cut(&text, &fractions);
        let chunks: Vec<&str> = pieces.iter().map(String::as_str).collect();
        prop_assert_eq!(parse_chunks(&chunks, Parser::new()), parse(&text));
    }

    #[test]
    fn text_without_tags_passes_through(
        text in untagged_text(),
        fractions in prop::collection::vec(0.0f64..1.0, 0..8),
    ) {
        prop_assume!(!TAGS.iter().any(|t| text.contains(t)));
        let pieces = cut(&text, &fractions);
        let chunks: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let events = parse_chunks(&chunks, Parser::new());
        let mut joined = String::new();
        for event in &events {
            match event {
                Event::Content(s) => joined.push_str(s),
                other => prop_assert!(false, "unexpected {:?}", other),
            }
        }
        prop_assert_eq!(joined, text);
    }

    #[test]
    fn arbitrary_strings_never_panic(text in any::<String>(), fractions in prop::collection::vec(0.0f64..1.0, 0..8)) {
        let pieces = cut(&text, &fractions);
        let chunks: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let _ = parse_chunks(&chunks, Parser::new());
        let _ = parse_tool_call(&text);
        let _ = parse_arguments(&text);
    }

    #[test]
    fn formatted_calls_parse_back(
        args in prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,8}", json_value(), 0..6),
        fractions in prop::collection::vec(0.0f64..1.0, 0..6),
    ) {
        let arguments = Value::Object(args.into_iter().collect());
        let c = call("do_it", arguments);
        let text = format_tool_call(&c).unwrap();
        let pieces = cut(&text, &fractions);
        let chunks: Vec<&str> = pieces.iter().map(String::as_str).collect();
        prop_assert_eq!(parse_chunks(&chunks, Parser::new()), vec![Event::ToolCall(c)]);
    }
}

/// JSON values that Gemma's syntax can carry exactly: strings without the delimiter,
/// integers, and floats with a fractional part.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_filter("fractional", |f| f.fract() != 0.0).prop_map(Value::from),
        any::<String>().prop_filter("no delimiter", |s| !s.contains(Q)).prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
