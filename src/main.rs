//! The `kgate` command: `serve` runs the server; `cluster` and `kubeconfig` talk to a running one.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use kgate::http::inflight::Limits;

#[derive(Parser)]
#[command(name = "kgate", version, about = "Serve the Kubernetes API for many logical clusters")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format, as kube's components offer it: `text` (colour only on a terminal) or `json` (one
    /// object a line, for log collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "KGATE_LOGGING_FORMAT")]
    logging_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once at start: the size of the serve variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the server.
    Serve(ServeArgs),
    /// Create, list or delete logical clusters on a running server.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
        /// Admin kubeconfig (default: $KUBECONFIG, then ./kgate-data/admin.kubeconfig).
        #[arg(long, global = true)]
        kubeconfig: Option<PathBuf>,
    },
    /// Print a kubeconfig for one logical cluster, with a ServiceAccount token bound to it.
    Kubeconfig(KubeconfigArgs),
}

#[derive(Subcommand)]
enum ClusterAction {
    /// Create a logical cluster and wait until it serves.
    Create {
        /// Its name (a DNS-1123 label).
        name: String,
        /// The shard its objects live on (a `--shard` name of the server, or `default`); without it
        /// the server puts it on the shard with the fewest clusters.
        #[arg(long)]
        shard: Option<String>,
    },
    /// List logical clusters.
    List,
    /// Delete a logical cluster and everything in it (in the background unless --wait).
    Delete {
        /// Its name.
        name: String,
        /// Wait until every object of it is purged and the LogicalCluster is gone (it stops serving at once).
        #[arg(long)]
        wait: bool,
    },
    /// Move a logical cluster's objects to another shard (it answers 503 while they move).
    Move {
        /// Its name.
        name: String,
        /// The shard to move it to (one the server is given with --shard, or `default`).
        #[arg(long)]
        to: String,
        /// Wait until the move is done.
        #[arg(long)]
        wait: bool,
    },
}

#[derive(clap::Args)]
struct KubeconfigArgs {
    /// The logical cluster.
    #[arg(long)]
    cluster: String,
    /// The ServiceAccount the token is for, NAMESPACE/NAME (created if missing). Default: one per role,
    /// default/kgate-admin, default/kgate-edit or default/kgate-view.
    #[arg(long)]
    service_account: Option<String>,
    /// A new ServiceAccount for this kubeconfig alone (default/kgate-<role>-<random>), to revoke by itself.
    #[arg(long, conflicts_with = "service_account")]
    unique: bool,
    /// Revoke instead: delete the ServiceAccount (--service-account, or the role's default), which ends
    /// every token and kubeconfig made for it. (Kubeconfigs made before accounts were per role used
    /// default/kgate-user: name it to revoke them.)
    #[arg(long, conflicts_with = "unique")]
    revoke: bool,
    /// What it may do in the cluster: admin (everything), edit or view.
    #[arg(long, default_value = "admin")]
    role: String,
    /// Token lifetime (e.g. 30m, 24h, 7d).
    #[arg(long, default_value = "24h")]
    duration: String,
    /// Server URL to write into the kubeconfig (default: the admin kubeconfig's).
    #[arg(long)]
    server: Option<String>,
    /// Admin kubeconfig (default: $KUBECONFIG, then ./kgate-data/admin.kubeconfig).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on (HTTPS).
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: std::net::SocketAddr,
    /// Directory for the embedded store, the PKI and admin.kubeconfig.
    #[arg(long, default_value = "./kgate-data")]
    data_dir: PathBuf,
    /// etcd endpoints (comma-separated URLs); without it the embedded store is used.
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// Another etcd cluster to place logical clusters on, as NAME=URL[,URL...] (repeatable); the
    /// `--etcd-servers` store is the shard named `default` and keeps root. Same prefix and TLS options.
    #[arg(long = "shard")]
    shards: Vec<kgate::config::ShardConfig>,
    /// Key prefix of every object.
    #[arg(long, default_value = "/registry")]
    etcd_prefix: String,
    /// CA bundle for etcd's serving certificate.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long)]
    etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long)]
    etcd_keyfile: Option<PathBuf>,
    /// The address every logical cluster's `default/kubernetes` Endpoints and EndpointSlice name (with
    /// the listen port), as kube-apiserver's flag: the load balancer's or Service's address in front of
    /// several replicas, which should all give the same one. Default: the listen address (loopback when
    /// listening on all addresses).
    #[arg(long)]
    advertise_address: Option<std::net::IpAddr>,
    /// Serving certificate (PEM) instead of the generated one.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// Serving key (PEM) for --tls-cert-file.
    #[arg(long)]
    tls_key_file: Option<PathBuf>,
    /// LogicalCluster manifests (*.yaml, *.yml, *.json) to create or update at start; never deletes.
    /// Default: ./tenants if that directory exists.
    #[arg(long, value_name = "DIR")]
    tenants_dir: Option<PathBuf>,
    /// Non-mutating requests in flight, server-wide, before 429 (watches not counted; 0: no limit).
    #[arg(long, default_value_t = Limits::default().requests)]
    max_requests_inflight: usize,
    /// Mutating requests in flight, server-wide, before 429 (0: no limit).
    #[arg(long, default_value_t = Limits::default().mutating)]
    max_mutating_requests_inflight: usize,
    /// Requests in flight in one logical cluster, before 429 (0: no limit).
    #[arg(long, default_value_t = Limits::default().per_cluster)]
    max_requests_inflight_per_cluster: usize,
    /// Watches open in one logical cluster, before 429 (0: no limit).
    #[arg(long, default_value_t = Limits::default().watches_per_cluster)]
    max_watches_per_cluster: usize,
    /// How many of the busiest logical clusters (by recent request rate) root's /metrics names with a
    /// `cluster` label; the others are summed as `cluster="other"`.
    #[arg(long, default_value_t = kgate::usage::DEFAULT_TOP)]
    metrics_top_clusters: usize,
    /// Count each logical cluster's requests (its /metrics, root's busiest clusters) and what it
    /// holds in the store (LogicalCluster status.usage, and the objects, storageBytes, namespaces and
    /// customResourceDefinitions of spec.limits, which are not enforced without it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    usage_accounting: bool,
    /// Seconds a request may wait for its turn when the server-wide budget of its kind is spent,
    /// before 429; waiting requests are served by turns over their logical clusters (0: refuse at once).
    #[arg(long, default_value_t = Limits::default().queue_wait.as_secs_f64())]
    inflight_queue_wait_seconds: f64,
    /// Client connections open at once; more are closed as soon as accepted (0: as many as the
    /// open-file limit allows).
    #[arg(long, default_value_t = kgate::http::server::ConnLimits::default().max)]
    max_connections: usize,
    /// Audiences a ServiceAccount token must name one of to be accepted by the API (comma-separated);
    /// TokenRequests without audiences get these.
    #[arg(long, value_delimiter = ',', default_values_t = kgate::http::tokens::default_audiences())]
    api_audiences: Vec<String>,
    /// Bytes that answers being sent may hold in the whole server before requests are refused (0: no limit).
    #[arg(long, default_value_t = kgate::budget::Limits::default().server)]
    max_response_bytes_inflight: u64,
    /// Bytes that answers being sent may hold in one logical cluster before its requests are refused (0: no limit).
    #[arg(long, default_value_t = kgate::budget::Limits::default().per_cluster)]
    max_response_bytes_inflight_per_cluster: u64,
    /// An audit.k8s.io/v1 Policy file (YAML or JSON): which requests the audit log records, at which level.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events go, one JSON line per stage (`-` for stdout); needs --audit-policy-file.
    #[arg(long)]
    audit_log_path: Option<String>,
    /// Rotate the audit log once it would pass this many MiB (0: never).
    #[arg(long, default_value_t = 0)]
    audit_log_maxsize: u64,
    /// Rotated audit logs to keep (0: all).
    #[arg(long, default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// Days to keep rotated audit logs (0: forever).
    #[arg(long, default_value_t = 0)]
    audit_log_maxage: u64,
}

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    // jemalloc purges pages unused for its decay time (10 s) only when some thread allocates or frees,
    // so an idle server would keep what a burst took: its background thread purges them regardless.
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        eprintln!("warning: jemalloc's background thread could not start ({e}); freed memory returns to the system only under load");
    }
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match cli.logging_format {
        LogFormat::Json => logs.json().flatten_event(true).init(),
        // Colour codes are for people at a terminal; in a file or a collector they are noise.
        LogFormat::Text => logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
    }
    let rt = tokio::runtime::Runtime::new()?;
    match cli.command {
        Command::Serve(a) => rt.block_on(serve(a)),
        Command::Cluster { action, kubeconfig } => {
            let admin = kgate::cli::Admin::from_kubeconfig(&kgate::cli::kubeconfig_path(kubeconfig))?;
            let out = rt.block_on(async {
                match action {
                    ClusterAction::Create { name, shard } => {
                        kgate::cli::cluster_create(&admin, &name, shard.as_deref()).await
                    }
                    ClusterAction::List => kgate::cli::cluster_list(&admin).await,
                    ClusterAction::Delete { name, wait } => kgate::cli::cluster_delete(&admin, &name, wait).await,
                    ClusterAction::Move { name, to, wait } => kgate::cli::cluster_move(&admin, &name, &to, wait).await,
                }
            })?;
            println!("{}", out.trim_end());
            Ok(())
        }
        Command::Kubeconfig(a) => {
            let admin = kgate::cli::Admin::from_kubeconfig(&kgate::cli::kubeconfig_path(a.kubeconfig))?;
            kgate::cli::role_of(&a.role)?;
            let account = match (&a.service_account, a.unique) {
                (Some(sa), _) => sa.clone(),
                (None, true) => {
                    let suffix: String = (0..5).map(|_| (b'a' + rand::random::<u8>() % 26) as char).collect();
                    format!("default/{}-{suffix}", kgate::cli::default_service_account(&a.role))
                }
                (None, false) => format!("default/{}", kgate::cli::default_service_account(&a.role)),
            };
            let (namespace, service_account) =
                account.split_once('/').ok_or_else(|| anyhow::anyhow!("--service-account must be NAMESPACE/NAME"))?;
            if a.revoke {
                println!("{}", rt.block_on(kgate::cli::revoke(&admin, &a.cluster, namespace, service_account))?);
                return Ok(());
            }
            let req = kgate::cli::KubeconfigRequest {
                cluster: &a.cluster,
                namespace,
                service_account,
                role: &a.role,
                seconds: kgate::cli::parse_duration(&a.duration)?,
                server: a.server.as_deref(),
            };
            print!("{}", rt.block_on(kgate::cli::kubeconfig(&admin, &req))?);
            Ok(())
        }
    }
}

async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    let config = kgate::config::Config {
        listen: a.listen,
        data_dir: a.data_dir,
        etcd_servers: a.etcd_servers,
        shards: a.shards,
        etcd_prefix: a.etcd_prefix,
        etcd_tls: kgate::storage::etcd::EtcdTls {
            ca_file: a.etcd_cafile,
            cert_file: a.etcd_certfile,
            key_file: a.etcd_keyfile,
        },
        tls_cert_file: a.tls_cert_file,
        tls_key_file: a.tls_key_file,
        advertise_address: a.advertise_address,
        tenants_dir: a.tenants_dir.or_else(|| Some(PathBuf::from("./tenants")).filter(|d| d.is_dir())),
        inflight: Limits {
            requests: a.max_requests_inflight,
            mutating: a.max_mutating_requests_inflight,
            per_cluster: a.max_requests_inflight_per_cluster,
            watches_per_cluster: a.max_watches_per_cluster,
            queue_wait: std::time::Duration::try_from_secs_f64(a.inflight_queue_wait_seconds)
                .map_err(|e| anyhow::anyhow!("--inflight-queue-wait-seconds: {e}"))?,
        },
        connections: kgate::http::server::ConnLimits { max: a.max_connections, ..Default::default() },
        bytes: kgate::budget::Limits {
            server: a.max_response_bytes_inflight,
            per_cluster: a.max_response_bytes_inflight_per_cluster,
        },
        api_audiences: a.api_audiences,
        metrics_top_clusters: a.metrics_top_clusters,
        usage_accounting: a.usage_accounting,
        audit: match (a.audit_policy_file, a.audit_log_path) {
            (Some(policy_file), Some(path)) => Some(kgate::config::AuditConfig {
                policy_file,
                log: kgate::audit::LogOptions {
                    path,
                    max_size_mb: a.audit_log_maxsize,
                    max_backup: a.audit_log_maxbackup,
                    max_age_days: a.audit_log_maxage,
                },
            }),
            (None, Some(_)) => anyhow::bail!("--audit-log-path needs --audit-policy-file"),
            // As kube-apiserver: a policy with no log to write to records nothing.
            (_, None) => None,
        },
        ..Default::default()
    };
    let running = kgate::server::start(config).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    let _ = running.shutdown.send(true);
    let _ = running.done.await;
    Ok(())
}
