//! Running as a process: the runtimes, the listeners, the stop signals,
//! the drain, trips shared through Redis.
//!
//! **Workers.** Clients are served by `--workers` threads (one per CPU by
//! default), each with a single-threaded tokio runtime of its own that
//! accepts from the one listening socket, as nginx's worker processes do: a
//! connection, its requests and its upstream connections stay on the
//! thread that accepted it (each worker has its own idle upstream
//! connections, [`UpstreamClient`]), so no request is handed from one
//! thread to another. A multi-threaded runtime would share its tasks among
//! its threads, and pay for it in wakes across threads: measured through
//! wrk on 2 CPUs, this takes a fifth less CPU per request
//! (`incident/results/overhead.md`). The main thread's own runtime has the
//! signals, the admin listener, the demo's upstreams and the Redis sync.

use super::*;

thread_local! {
    /// Which worker this thread is (0 for any thread that is not one).
    static WORKER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The worker the current thread is (0 outside the workers).
pub fn worker() -> usize {
    WORKER.with(std::cell::Cell::get)
}

/// The default `--workers`: one per CPU.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

pub fn main_with(args: impl IntoIterator<Item = String>) -> i32 {
    let options = match parse_args(args) {
        Ok(Cli::Run(options)) => *options,
        Ok(Cli::Help) => {
            print!("{USAGE}");
            return 0;
        }
        Err(err) => {
            eprintln!("error: {err}\n\n{USAGE}");
            return 2;
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the runtime: {err}");
            return 1;
        }
    };
    match runtime.block_on(run(options)) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("error: {err}");
            1
        }
    }
}

/// Serves until SIGTERM or SIGINT, then drains (see [`Proxy::shutdown`]).
pub(crate) async fn run(options: Options) -> io::Result<()> {
    // Installed first: a signal from now on drains rather than kills.
    let mut stop = StopSignals::new()?;
    let mut routes: HashMap<String, Authority> = options.routes.into_iter().collect();
    if options.demo {
        for (name, mode) in [
            ("healthy", HEALTHY),
            ("slow", slow(800)),
            ("failing", FAILING),
        ] {
            let addr = upstream(mode).await?.addr;
            routes.insert(name.to_owned(), authority(addr));
        }
        routes.insert("down".to_owned(), authority(refusing().await?));
    }
    let drain = options.settings.drain;
    let breakers = breakers(options.config.as_deref(), &options.breaker_sets)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let proxy = proxy_with(routes, breakers, options.settings)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    #[cfg(feature = "redis")]
    if let (Some(url), Some(outbox)) = (&options.redis, &proxy.outbox) {
        share_trips(&proxy, outbox.clone(), url, options.replica.as_deref())?;
    }
    let listener = bind(options.listen).await?.into_std()?;
    eprintln!("failfast proxy on http://{}", listener.local_addr()?);
    let admin = match options.admin {
        Some(addr) => {
            let admin = bind(addr).await?;
            eprintln!("status on http://{}{STATUS_PATH}", admin.local_addr()?);
            Some(admin)
        }
        None => {
            eprintln!("status on http://{}{STATUS_PATH}", listener.local_addr()?);
            None
        }
    };
    let mut names: Vec<_> = proxy.routes.iter().collect();
    names.sort_by_key(|(name, _)| name.as_str());
    for (name, to) in names {
        eprintln!("  /{name}/  ->  http://{to}/");
    }
    // Every worker's descriptors (its runtime, its copy of the listener)
    // are taken before the first one accepts: once clients are accepted, a
    // proxy short of descriptors must back off, not fail to start a worker.
    let mut workers = Vec::new();
    for index in 0..proxy.settings.workers {
        workers.push(Worker::new(index, listener.try_clone()?)?);
    }
    drop(listener); // the workers' copies are the socket's last
                    // Each accept loop says when it has returned (its listener closed).
    let mut loops = Vec::new();
    for worker in workers {
        let (returned, on_return) = tokio::sync::oneshot::channel::<()>();
        worker.spawn(proxy.clone(), returned)?;
        loops.push(on_return);
    }
    if let Some(admin) = admin {
        let (returned, on_return) = tokio::sync::oneshot::channel::<()>();
        let proxy = proxy.clone();
        tokio::spawn(async move {
            serve_admin(admin, proxy).await;
            let _ = returned.send(());
        });
        loops.push(on_return);
    }

    let signal = stop.next().await;
    proxy.shutdown();
    for accept_loop in loops {
        let _ = accept_loop.await; // its listener is closed once it returns
    }
    eprintln!(
        "{signal}: stopped accepting; draining {} connections (at most {drain:?})",
        proxy.open_connections()
    );
    let drained = tokio::time::timeout(drain, proxy.drained()).await;
    // The access log's last lines before the last words.
    proxy.log.flush();
    match drained {
        Ok(()) => eprintln!("drained; exiting"),
        Err(_) => eprintln!(
            "drain deadline: closing {} connections still open; exiting",
            proxy.open_connections()
        ),
    }
    Ok(())
}

/// A thread-to-be that serves the routes: a single-threaded runtime and a
/// copy of the listening socket, made before any worker starts.
struct Worker {
    index: usize,
    runtime: tokio::runtime::Runtime,
    listener: std::net::TcpListener,
}

impl Worker {
    fn new(index: usize, listener: std::net::TcpListener) -> io::Result<Worker> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Worker {
            index,
            runtime,
            listener,
        })
    }

    /// Starts the worker's thread: it serves the routes on its listener,
    /// then drives its connections until every connection of the proxy has
    /// closed (the main thread ends the process at the drain's deadline).
    /// `returned` is sent once its accept loop has returned.
    fn spawn(
        self,
        proxy: Arc<Proxy>,
        returned: tokio::sync::oneshot::Sender<()>,
    ) -> io::Result<()> {
        let Worker {
            index,
            runtime,
            listener,
        } = self;
        std::thread::Builder::new()
            .name(format!("proxy-worker-{index}"))
            .spawn(move || {
                WORKER.with(|w| w.set(index));
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => serve(listener, proxy.clone()).await,
                        Err(err) => eprintln!("worker {index}: {err}"),
                    }
                    let _ = returned.send(());
                    proxy.drained().await;
                });
            })?;
        Ok(())
    }
}

/// Binds `addr`, naming it in the error (the OS's "Address already in
/// use" does not).
pub(crate) async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|err| io::Error::new(err.kind(), format!("cannot listen on {addr}: {err}")))
}

/// SIGTERM (how process managers and Kubernetes stop a process) and SIGINT
/// (Ctrl-C), each caught from the moment this is made.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn new() -> io::Result<StopSignals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(StopSignals {
                terminate: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignals {})
    }

    /// The next stop signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.terminate.recv() => "SIGTERM",
                _ = self.interrupt.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

/// Starts the task that shares this proxy's trips through Redis at `url`
/// (on the current tokio runtime); its counters.
#[cfg(feature = "redis")]
pub fn share_trips(
    proxy: &Proxy,
    outbox: Arc<Outbox>,
    url: &str,
    name: Option<&str>,
) -> io::Result<Arc<failfast::share::SyncStats>> {
    use failfast::redis::RedisSyncBuilder;
    use failfast::share::Replica;

    let invalid =
        |e: failfast::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let mut replica = Replica::builder(proxy.registry.clone(), outbox);
    if let Some(name) = name {
        replica = replica.origin(name);
    }
    let replica = replica.build().map_err(invalid)?;
    eprintln!("sharing trips through {url} as {}", replica.origin());
    let sync = RedisSyncBuilder::new(url).build(replica).map_err(invalid)?;
    let stats = sync.stats();
    tokio::spawn(sync.run());
    Ok(stats)
}

pub(crate) fn authority(addr: SocketAddr) -> Authority {
    Authority::try_from(addr.to_string()).expect("a socket address is an authority")
}
