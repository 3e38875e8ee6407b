//! The model worker: one thread that owns the loaded model and runs loads, unloads and
//! replies one at a time, in order. Requests arrive over a channel.
//!
//! - Loading or unloading first cancels any reply in progress (it ends as `cancelled`).
//! - A load that fails leaves the previous model loaded and untouched: the new model is
//!   built beside it and swapped in only once complete.
//! - Each reply has its own cancel flag; `cancel_generation` sets the flags of the reply
//!   running now and of those queued, so a stop never leaks into a later reply.
//! - A panic inside the backend is caught: the reply fails with a message, and the model
//!   (whose state is then unknown) is unloaded.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rullama::store::ResolvedModel;
use serde::Serialize;

use super::engine::{Backend, Engine, LoadProgress};
use super::generation::{self, GenerateJob, ReplyObserver};
use crate::error::{AppError, AppResult};

/// What is loaded, as the UI shows it (`LoadedModel` in the command contract).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadedModel {
    pub name: String,
    pub architecture: String,
    /// The model's own context limit.
    pub context_length: u64,
    pub capabilities: Vec<String>,
    /// Weights, summed over every tensor.
    pub parameters: u64,
    /// `false` for a base (not instruction-tuned) model: replies continue the text.
    pub chat: bool,
    /// Where it runs: the GPU adapter's name, or the CPU.
    pub device: String,
    pub parameter_size: Option<String>,
    pub quantization: Option<String>,
    /// The model's own default system prompt (Ollama's SYSTEM layer).
    #[serde(skip)]
    pub default_system: Option<String>,
}

impl LoadedModel {
    fn of(m: &ResolvedModel, backend: &dyn Backend) -> LoadedModel {
        let e = &m.entry;
        LoadedModel {
            name: e.name.clone(),
            architecture: e.architecture.clone().unwrap_or_default(),
            context_length: backend.context_length() as u64,
            capabilities: e.capabilities.clone(),
            parameters: e.parameters.unwrap_or(0),
            chat: backend.is_chat(),
            device: backend.device(),
            parameter_size: e.parameter_size.clone(),
            quantization: e.quantization.clone(),
            default_system: m.system.clone().filter(|s| !s.trim().is_empty()),
        }
    }
}

type ProgressFn = Box<dyn FnMut(LoadProgress) + Send>;

enum Request {
    Load { model: Box<ResolvedModel>, progress: ProgressFn, reply: Sender<AppResult<LoadedModel>> },
    Unload { reply: Sender<()> },
    Generate { job: GenerateJob, cancel: Arc<AtomicBool>, observer: Box<dyn ReplyObserver> },
}

#[derive(Default)]
struct Shared {
    loaded: Mutex<Option<LoadedModel>>,
    /// Cancel flags of the replies queued or running.
    replies: Mutex<Vec<Arc<AtomicBool>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct Worker {
    tx: Mutex<Option<Sender<Request>>>,
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Worker {
    pub fn spawn(engine: Arc<dyn Engine>) -> Worker {
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(Shared::default());
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("model-worker".into())
            .spawn(move || serve(engine, rx, thread_shared))
            .expect("the OS can start a thread");
        Worker { tx: Mutex::new(Some(tx)), shared, thread: Mutex::new(Some(thread)) }
    }

    fn send(&self, r: Request) -> AppResult<()> {
        let tx = lock(&self.tx);
        tx.as_ref().ok_or(AppError::ShuttingDown)?.send(r).map_err(|_| AppError::ShuttingDown)
    }

    /// Load `model`, replacing the current one on success. Blocks until done.
    pub fn load(&self, model: ResolvedModel, progress: ProgressFn) -> AppResult<LoadedModel> {
        self.cancel_generation();
        let (reply, rx) = mpsc::channel();
        self.send(Request::Load { model: Box::new(model), progress, reply })?;
        rx.recv().map_err(|_| AppError::ShuttingDown)?
    }

    pub fn unload(&self) -> AppResult<()> {
        self.cancel_generation();
        let (reply, rx) = mpsc::channel();
        self.send(Request::Unload { reply })?;
        rx.recv().map_err(|_| AppError::ShuttingDown)
    }

    pub fn current(&self) -> Option<LoadedModel> {
        lock(&self.shared.loaded).clone()
    }

    /// Queue a reply. The observer always gets `finished`, also when the reply cannot run.
    pub fn generate(&self, job: GenerateJob, observer: Box<dyn ReplyObserver>) {
        let cancel = Arc::new(AtomicBool::new(false));
        lock(&self.shared.replies).push(cancel.clone());
        let request = Request::Generate { job, cancel, observer };
        let tx = lock(&self.tx);
        let unsent = match tx.as_ref() {
            Some(tx) => tx.send(request).err().map(|e| e.0),
            None => Some(request),
        };
        if let Some(Request::Generate { cancel, observer, .. }) = unsent {
            lock(&self.shared.replies).retain(|c| !Arc::ptr_eq(c, &cancel));
            observer.finished(Err(AppError::ShuttingDown));
        }
    }

    /// Stop the running reply and drop the queued ones (they finish as cancelled).
    pub fn cancel_generation(&self) {
        for c in lock(&self.shared.replies).iter() {
            c.store(true, Ordering::Relaxed);
        }
    }

    /// Cancel everything and wait for the worker thread to end.
    pub fn shutdown(&self) {
        self.cancel_generation();
        lock(&self.tx).take();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve(engine: Arc<dyn Engine>, rx: Receiver<Request>, shared: Arc<Shared>) {
    let mut backend: Option<Box<dyn Backend>> = None;
    for request in rx {
        match request {
            Request::Load { model, mut progress, reply } => {
                // Loads are not cancellable from outside yet; the flag is for the engine API.
                let never = AtomicBool::new(false);
                let result = catch_unwind(AssertUnwindSafe(|| engine.load(&model, &mut *progress, &never)));
                let result = match result {
                    Ok(Ok(b)) => {
                        let info = LoadedModel::of(&model, b.as_ref());
                        backend = Some(b);
                        *lock(&shared.loaded) = Some(info.clone());
                        Ok(info)
                    }
                    Ok(Err(e)) => Err(AppError::from(e)),
                    Err(_) => Err(AppError::Invalid(format!("Loading {} crashed; the model file may be broken.", model.entry.name))),
                };
                let _ = reply.send(result);
            }
            Request::Unload { reply } => {
                backend = None;
                *lock(&shared.loaded) = None;
                let _ = reply.send(());
            }
            Request::Generate { job, cancel, mut observer } => {
                let result = match backend.as_mut() {
                    None => Err(AppError::NoModel),
                    Some(b) => match catch_unwind(AssertUnwindSafe(|| generation::run(b.as_mut(), &job, &cancel, &mut *observer))) {
                        Ok(r) => r,
                        Err(_) => {
                            backend = None;
                            *lock(&shared.loaded) = None;
                            Err(AppError::Invalid("The model failed while writing this reply and was unloaded. Load it again to continue.".into()))
                        }
                    },
                };
                lock(&shared.replies).retain(|c| !Arc::ptr_eq(c, &cancel));
                observer.finished(result);
            }
        }
    }
}
