use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rullama::chat::Template;

use crate::error::AppError;
use crate::paths::AppPaths;
use crate::services::Services;
use crate::services::engine::LoadProgress;
use crate::services::history::{Id, Sampling, Status};
use crate::services::script_engine::ScriptEngine;
use crate::services::stream::testing::Collect;
use crate::services::stream::{EventSink, StopReason, StreamEvent};

const WAIT: Duration = Duration::from_secs(20);

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/g3_tiny.f32.gguf")
}

struct App {
    _dir: tempfile::TempDir,
    s: Services,
    engine: ScriptEngine,
    model: String,
}

/// Services on a throwaway data dir with the tiny fixture imported (its name is the
/// file stem) and a copy of it named `broken`, which the scripted engine fails to load.
fn app(engine: ScriptEngine) -> App {
    let dir = tempfile::tempdir().unwrap();
    let ollama = dir.path().join("ollama");
    std::fs::create_dir_all(&ollama).unwrap();
    let s = Services::open(AppPaths::new(dir.path().join("data")), Arc::new(engine.clone()), Some(vec![ollama])).unwrap();
    let model = s.models.import(&fixture()).unwrap().name;
    let broken = dir.path().join("broken.gguf");
    std::fs::copy(fixture(), &broken).unwrap();
    s.models.import(&broken).unwrap();
    App { _dir: dir, s, engine, model }
}

fn loaded(engine: ScriptEngine) -> App {
    let a = app(engine);
    a.s.models.load(&a.model, Box::new(|_| {})).unwrap();
    a
}

fn wait(reply: &crate::services::chat::Reply) {
    reply.done.recv_timeout(WAIT).expect("the reply finishes");
}

fn tokens(events: &[StreamEvent], thinking: bool) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Token { text, thinking: t } if *t == thinking => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn last(events: &[StreamEvent]) -> StreamEvent {
    events.last().cloned().expect("at least one event")
}

fn message(a: &App, id: Id) -> crate::services::history::Message {
    a.s.history.message(id).unwrap().1
}

#[test]
fn a_reply_streams_is_saved_and_titles_the_chat() {
    let a = loaded(ScriptEngine::new(&["Hel", "lo", "", " there"]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "Hi llama", None, false, sink.clone()).unwrap();
    wait(&reply);
    let ev = sink.events();
    assert_eq!(ev[0], StreamEvent::Started { user_message_id: reply.user_message_id, assistant_message_id: reply.assistant_message_id });
    assert_eq!(tokens(&ev, false), "Hello there");
    assert_eq!(last(&ev), StreamEvent::Done { stop_reason: StopReason::EndOfTurn });
    let Some(StreamEvent::Stats { reply_tokens, prompt_tokens, context_used, context_max, .. }) =
        ev.iter().rev().find(|e| matches!(e, StreamEvent::Stats { .. })).cloned()
    else {
        panic!("no stats event: {ev:?}")
    };
    // Four generated tokens (one of them an incomplete character); the scripted engine
    // makes one token per prompt byte, so the prompt count is the rendered prompt's length.
    let prompt = a.engine.prompts.lock().unwrap()[0].clone();
    assert_eq!((reply_tokens, prompt_tokens), (4, prompt.len() as u32));
    assert_eq!((context_used, context_max), (prompt_tokens + 4, 4096));
    assert_eq!(prompt, "<bos><start_of_turn>user\nHi llama<end_of_turn>\n<start_of_turn>model\n");

    let m = message(&a, reply.assistant_message_id);
    assert_eq!((m.content.as_str(), m.status, m.reply_tokens), ("Hello there", Status::Complete, Some(4)));
    assert_eq!(m.model.as_deref(), Some(a.model.as_str()));
    let chat = a.s.history.get_chat(chat).unwrap();
    assert_eq!((chat.title.as_str(), chat.model.as_deref()), ("Hi llama", Some(a.model.as_str())));
}

#[test]
fn gemma4_thinking_is_split_from_the_answer() {
    let mut engine = ScriptEngine::new(&["<|channel>", "thought\nLet me", " think.", "<channel|>", "The answer", " is 4."]);
    engine.template = Template::Gemma4Small;
    let a = loaded(engine);
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "2+2?", None, true, sink.clone()).unwrap();
    wait(&reply);
    let ev = sink.events();
    assert_eq!(tokens(&ev, true), "Let me think.");
    assert_eq!(tokens(&ev, false), "The answer is 4.");
    let m = message(&a, reply.assistant_message_id);
    assert_eq!((m.thinking.as_deref(), m.content.as_str()), (Some("Let me think."), "The answer is 4."));
    // Thinking was asked for in the prompt.
    assert!(a.engine.prompts.lock().unwrap()[0].contains("<|think|>"));
}

#[test]
fn later_turns_see_the_branch_they_continue() {
    let a = loaded(ScriptEngine::new(&["Answer."]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    a.s.history.update_chat_settings(chat, Some("Be brief."), &Sampling::default()).unwrap();
    let sink = Arc::new(Collect::default());
    let r1 = a.s.chat.send_message(chat, "First?", None, false, sink.clone()).unwrap();
    wait(&r1);
    let r2 = a.s.chat.send_message(chat, "Second?", Some(r1.assistant_message_id), false, sink).unwrap();
    wait(&r2);
    let prompts = a.engine.prompts.lock().unwrap().clone();
    assert_eq!(
        prompts[1],
        "<bos><start_of_turn>user\nBe brief.\n\nFirst?<end_of_turn>\n<start_of_turn>model\nAnswer.<end_of_turn>\n\
         <start_of_turn>user\nSecond?<end_of_turn>\n<start_of_turn>model\n"
    );
}

#[test]
fn regenerate_adds_a_sibling_reply_to_the_same_question() {
    let a = loaded(ScriptEngine::new(&["One"]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let r1 = a.s.chat.send_message(chat, "Q", None, false, sink.clone()).unwrap();
    wait(&r1);
    let r2 = a.s.chat.regenerate(chat, r1.assistant_message_id, false, sink.clone()).unwrap();
    wait(&r2);
    assert_eq!(r2.user_message_id, r1.user_message_id);
    assert_ne!(r2.assistant_message_id, r1.assistant_message_id);
    let (m1, m2) = (message(&a, r1.assistant_message_id), message(&a, r2.assistant_message_id));
    assert_eq!((m1.parent_id, m2.parent_id), (Some(r1.user_message_id), Some(r1.user_message_id)));
    // The old reply is not part of the new prompt.
    let prompts = a.engine.prompts.lock().unwrap().clone();
    assert_eq!(prompts[0], prompts[1]);
    // Only assistant messages of the same chat can be regenerated.
    let other = a.s.history.create_chat(None).unwrap().id;
    assert!(matches!(a.s.chat.regenerate(other, r1.assistant_message_id, false, sink.clone()), Err(AppError::Invalid(_))));
    assert!(matches!(a.s.chat.regenerate(chat, r1.user_message_id, false, sink), Err(AppError::Invalid(_))));
}

#[test]
fn editing_a_message_branches_and_keeps_the_old_one() {
    let a = loaded(ScriptEngine::new(&["Reply"]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let r1 = a.s.chat.send_message(chat, "Original question", None, false, sink.clone()).unwrap();
    wait(&r1);
    let r2 = a.s.chat.edit_message(chat, r1.user_message_id, "Edited question", false, sink.clone()).unwrap();
    wait(&r2);
    let edited = message(&a, r2.user_message_id);
    assert_eq!((edited.content.as_str(), edited.parent_id), ("Edited question", None));
    assert_eq!(message(&a, r2.assistant_message_id).parent_id, Some(r2.user_message_id));
    assert_eq!(a.s.history.get_chat(chat).unwrap().messages.len(), 4);
    let prompt = a.engine.prompts.lock().unwrap()[1].clone();
    assert!(prompt.contains("Edited question") && !prompt.contains("Original question"), "{prompt}");
    assert!(matches!(a.s.chat.edit_message(chat, r1.assistant_message_id, "x", false, sink), Err(AppError::Invalid(_))));
}

/// Waits until the sink has seen `n` token events.
fn wait_tokens(sink: &Collect, n: usize) {
    let start = Instant::now();
    while sink.events().iter().filter(|e| matches!(e, StreamEvent::Token { .. })).count() < n {
        assert!(start.elapsed() < WAIT, "no tokens arrived");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn endless() -> ScriptEngine {
    let mut e = ScriptEngine::new(&[]);
    e.endless = true;
    e.pace = Duration::from_millis(2);
    e
}

#[test]
fn stop_keeps_exactly_what_was_shown_and_marks_it_incomplete() {
    let a = loaded(endless());
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "Go on", None, false, sink.clone()).unwrap();
    wait_tokens(&sink, 5);
    a.s.chat.stop();
    wait(&reply);
    let ev = sink.events();
    assert_eq!(last(&ev), StreamEvent::Done { stop_reason: StopReason::Cancelled });
    let m = message(&a, reply.assistant_message_id);
    assert_eq!(m.status, Status::Incomplete);
    assert_eq!(m.content, tokens(&ev, false));
    assert!(m.content.starts_with("w0 w1 w2 w3 w4 "), "{}", m.content);

    // A stop does not leak into the next reply.
    a.s.chat.stop();
    let r2 = a.s.chat.send_message(chat, "Again", Some(reply.assistant_message_id), false, sink.clone()).unwrap();
    wait_tokens(&sink, ev.iter().filter(|e| matches!(e, StreamEvent::Token { .. })).count() + 3);
    a.s.chat.stop();
    wait(&r2);
}

#[test]
fn a_new_message_elsewhere_stops_the_reply_in_progress() {
    let a = loaded(endless());
    let (c1, c2) = (a.s.history.create_chat(None).unwrap().id, a.s.history.create_chat(None).unwrap().id);
    let (s1, s2) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
    let r1 = a.s.chat.send_message(c1, "one", None, false, s1.clone()).unwrap();
    wait_tokens(&s1, 2);
    let r2 = a.s.chat.send_message(c2, "two", None, false, s2.clone()).unwrap();
    wait(&r1);
    assert_eq!(last(&s1.events()), StreamEvent::Done { stop_reason: StopReason::Cancelled });
    assert_eq!(message(&a, r1.assistant_message_id).status, Status::Incomplete);
    wait_tokens(&s2, 2);
    a.s.chat.stop();
    wait(&r2);
}

#[test]
fn switching_models_mid_reply_cancels_it_cleanly() {
    let a = loaded(endless());
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "Go", None, false, sink.clone()).unwrap();
    wait_tokens(&sink, 2);
    let progress = Arc::new(std::sync::Mutex::new(Vec::<LoadProgress>::new()));
    let p = progress.clone();
    let info = a.s.models.load(&a.model, Box::new(move |x| p.lock().unwrap().push(x))).unwrap();
    wait(&reply);
    assert_eq!(info.name, a.model);
    assert_eq!(last(&sink.events()), StreamEvent::Done { stop_reason: StopReason::Cancelled });
    assert_eq!(message(&a, reply.assistant_message_id).status, Status::Incomplete);
    assert_eq!(progress.lock().unwrap().last().map(|p| p.fraction), Some(1.0));
    assert_eq!(a.engine.loads.lock().unwrap().len(), 2);
}

#[test]
fn a_failed_load_leaves_the_previous_model_loaded() {
    let a = loaded(ScriptEngine::new(&["ok"]));
    let err = a.s.models.load("broken", Box::new(|_| {})).unwrap_err();
    assert!(err.to_string().starts_with("The model file is broken"), "{err}");
    assert_eq!(a.s.models.current().map(|m| m.name), Some(a.model.clone()));
    // And it still answers.
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    wait(&a.s.chat.send_message(chat, "still there?", None, false, sink.clone()).unwrap());
    assert_eq!(tokens(&sink.events(), false), "ok");
    // Unknown names say so.
    assert!(a.s.models.load("no-such-model", Box::new(|_| {})).unwrap_err().to_string().contains("no-such-model"));
}

#[test]
fn without_a_model_nothing_is_written() {
    let a = app(ScriptEngine::new(&["x"]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    assert!(matches!(a.s.chat.send_message(chat, "hello", None, false, sink.clone()), Err(AppError::NoModel)));
    assert!(matches!(a.s.chat.send_message(chat, "  ", None, false, sink.clone()), Err(AppError::Invalid(_))));
    assert!(a.s.history.get_chat(chat).unwrap().messages.is_empty());
    assert!(sink.events().is_empty());
    a.s.models.load(&a.model, Box::new(|_| {})).unwrap();
    a.s.models.unload().unwrap();
    assert!(a.s.models.current().is_none());
    assert!(matches!(a.s.chat.send_message(chat, "hello", None, false, sink), Err(AppError::NoModel)));
}

/// The prompt precision in Settings reaches each reply's request: f32-accurate by default,
/// f16 products from the first reply after the person chooses them.
#[test]
fn the_prefill_precision_setting_reaches_each_reply() {
    use rullama::runtime::backend::PrefillPrecision;
    let a = loaded(ScriptEngine::new(&["ok"]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let send = |text: &str| {
        let reply = a.s.chat.send_message(chat, text, None, false, Arc::new(Collect::default())).unwrap();
        wait(&reply);
    };
    send("first");
    let mut settings = a.s.settings.get();
    settings.prefill_precision = PrefillPrecision::F16;
    a.s.settings.set(settings).unwrap();
    send("second");
    assert_eq!(*a.engine.prefills.lock().unwrap(), [PrefillPrecision::F32, PrefillPrecision::F16]);
}

#[test]
fn a_conversation_longer_than_the_context_is_a_clear_error() {
    let a = loaded(ScriptEngine::new(&["x"]));
    let mut settings = a.s.settings.get();
    settings.context_length = Some(256);
    a.s.settings.set(settings).unwrap();
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, &"long ".repeat(60), None, false, sink.clone()).unwrap();
    wait(&reply);
    let StreamEvent::Error { message: text } = last(&sink.events()) else { panic!("{:?}", sink.events()) };
    assert!(text.contains("does not fit") && text.contains("256"), "{text}");
    let m = message(&a, reply.assistant_message_id);
    assert_eq!((m.status, m.error.as_deref()), (Status::Error, Some(text.as_str())));
}

#[test]
fn reply_length_and_context_limits_end_the_reply() {
    let a = loaded(endless());
    let chat = a.s.history.create_chat(None).unwrap().id;
    a.s.history.update_chat_settings(chat, None, &Sampling { max_tokens: Some(3), ..Sampling::default() }).unwrap();
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "count", None, false, sink.clone()).unwrap();
    wait(&reply);
    assert_eq!(last(&sink.events()), StreamEvent::Done { stop_reason: StopReason::MaxTokens });
    assert_eq!(message(&a, reply.assistant_message_id).content, "w0 w1 w2 ");

    // The model's own limit caps the context asked for in Settings.
    let mut small = endless();
    small.context_length = 300;
    let b = loaded(small);
    let chat = b.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = b.s.chat.send_message(chat, "fill it", None, false, sink.clone()).unwrap();
    wait(&reply);
    let ev = sink.events();
    assert_eq!(last(&ev), StreamEvent::Done { stop_reason: StopReason::ContextFull });
    let Some(StreamEvent::Stats { context_used, context_max, .. }) = ev.iter().rev().find(|e| matches!(e, StreamEvent::Stats { .. })).cloned() else {
        panic!()
    };
    assert_eq!((context_used, context_max), (299, 300));
}

/// Prints each token as it is sent; the parent reads them as "what the UI showed".
struct PrintSink;

impl EventSink for PrintSink {
    fn send(&self, event: StreamEvent) {
        if let StreamEvent::Token { text, .. } = event {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "TOKEN {text}");
            let _ = out.flush();
        }
    }
}

const CRASH_CHILD: &str = "RULLAMA_TEST_CRASH_CHILD";

/// The writer killed with SIGKILL mid-reply: on reopening, every token the child had sent
/// is in the database, and the reply is marked incomplete.
#[test]
fn killed_mid_stream_keeps_what_was_shown() {
    if let Some(dir) = std::env::var_os(CRASH_CHILD) {
        // Child: stream forever into the database in `dir` until killed.
        let paths = AppPaths::new(PathBuf::from(dir));
        let s = Services::open(paths, Arc::new(endless()), Some(vec![])).unwrap();
        let model = s.models.import(&fixture()).unwrap().name;
        s.models.load(&model, Box::new(|_| {})).unwrap();
        let chat = s.history.create_chat(None).unwrap().id;
        let _reply = s.chat.send_message(chat, "Never stop", None, false, Arc::new(PrintSink)).unwrap();
        std::thread::sleep(Duration::from_secs(60));
        panic!("the parent should have killed this process");
    }

    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "services::chat::tests::killed_mid_stream_keeps_what_was_shown", "--nocapture", "--test-threads=1"])
        .env(CRASH_CHILD, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if let Some(t) = line.strip_prefix("TOKEN ") {
                let _ = tx.send(t.to_string());
            }
        }
    });
    let mut shown = Vec::new();
    while shown.len() < 40 {
        shown.push(rx.recv_timeout(WAIT).expect("the child streams tokens"));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    reader.join().unwrap();
    shown.extend(rx.try_iter());

    let (history, recovered) = crate::services::history::History::open(&dir.path().join("rullama.db")).unwrap();
    assert_eq!(recovered, 1);
    let chat = history.list_chats().unwrap()[0].id;
    let reply = history.get_chat(chat).unwrap().messages.pop().unwrap();
    assert_eq!(reply.status, Status::Incomplete);
    // Saved before sent: the database holds every shown token, and at most the one the
    // child saved but was killed before sending. (Printed tokens lose their trailing space.)
    let saved: Vec<&str> = reply.content.split_whitespace().collect();
    let expected: Vec<String> = (0..saved.len()).map(|i| ScriptEngine::endless_piece(i).trim().to_string()).collect();
    assert_eq!(saved, expected);
    assert!(saved.len() == shown.len() || saved.len() == shown.len() + 1, "saved {} shown {}", saved.len(), shown.len());
}

#[test]
fn a_base_model_continues_the_conversation_as_text() {
    let mut engine = ScriptEngine::new(&["\n", "\nThe capital", " is Paris."]);
    engine.chat = false;
    let a = loaded(engine);
    assert_eq!(a.s.models.current().map(|m| m.chat), Some(false));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let r1 = a.s.chat.send_message(chat, "What is the capital of France?", None, false, sink.clone()).unwrap();
    wait(&r1);
    assert_eq!(message(&a, r1.assistant_message_id).content, "The capital is Paris.");
    let r2 = a.s.chat.send_message(chat, "And of Italy?", Some(r1.assistant_message_id), false, sink).unwrap();
    wait(&r2);
    let prompts = a.engine.prompts.lock().unwrap().clone();
    assert_eq!(prompts[0], "<bos>What is the capital of France?");
    assert_eq!(prompts[1], "<bos>What is the capital of France?\n\nThe capital is Paris.\n\nAnd of Italy?");
}

#[test]
fn a_backend_that_panics_fails_the_reply_and_unloads() {
    let a = loaded(ScriptEngine::new(&["Partial", crate::services::script_engine::PANIC]));
    let chat = a.s.history.create_chat(None).unwrap().id;
    let sink = Arc::new(Collect::default());
    let reply = a.s.chat.send_message(chat, "Crash", None, false, sink.clone()).unwrap();
    wait(&reply);
    let StreamEvent::Error { message: text } = last(&sink.events()) else { panic!("{:?}", sink.events()) };
    assert!(text.contains("unloaded"), "{text}");
    let m = message(&a, reply.assistant_message_id);
    assert_eq!((m.status, m.content.as_str()), (Status::Error, "Partial"));
    assert!(a.s.models.current().is_none());
    // The worker is still alive: the model loads again.
    a.s.models.load(&a.model, Box::new(|_| {})).unwrap();
}

#[test]
fn the_demo_model_file_is_listed_without_importing_it_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("models")).unwrap();
    std::fs::copy(fixture(), data.join(crate::services::models::DEMO_FILE)).unwrap();
    let ollama = dir.path().join("ollama");
    std::fs::create_dir_all(&ollama).unwrap();
    let open = || Services::open(AppPaths::new(&data), Arc::new(ScriptEngine::new(&[])), Some(vec![ollama.clone()])).unwrap();
    let s = open();
    let names: Vec<String> = s.models.list().unwrap().into_iter().map(|e| e.name).collect();
    assert_eq!(names, vec!["gemma3:270m".to_string()]);
    drop(s);
    // Once listed it is not added again.
    let s = open();
    assert_eq!(s.models.list().unwrap().len(), 1);
    assert!(!s.models.adopt_demo_model().unwrap());
}
