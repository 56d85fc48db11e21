//! Embedded PostgreSQL: owns the private cluster that the service starts from the machine's PostgreSQL binaries when it runs without `DATABASE_URL` (finding the binaries, initialising the data directory, starting the server on a Unix socket only, creating the `statki` database, and stopping it again).

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::io::ErrorKind;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tracing::{info, warn};

/// The port only names the socket file (`.s.PGSQL.<port>`); nothing listens on TCP,
/// so it cannot clash with a system server on the same port.
const PORT: u16 = 5432;
/// Superuser created by initdb; trust authentication means no password.
const SUPERUSER: &str = "postgres";
/// Database the service uses.
const DATABASE: &str = "statki";
/// `sun_path` is 108 bytes on Linux (104 on BSDs); stay well under both.
const MAX_SOCKET_PATH: usize = 100;
/// Where Debian-style packages install one `bin/` per major version.
const VERSIONED_BIN_ROOT: &str = "/usr/lib/postgresql";
/// Seconds to wait for the server to start (pg_ctl -t) or to answer.
const READY_TIMEOUT_SECS: u64 = 30;
/// Seconds to wait for a fast shutdown in [`EmbeddedPostgres::stop`].
const STOP_TIMEOUT_SECS: u64 = 60;
/// Server log, kept inside the data directory because that is the one place the
/// server's user is always allowed to write.
const LOG_FILE: &str = "postgres.log";
/// What to tell the operator when no usable binaries exist.
const NO_BINARIES_HELP: &str = "install PostgreSQL server binaries (Debian: apt-get install postgresql), or set PG_BINDIR to the directory containing initdb and pg_ctl, or set DATABASE_URL to an existing server";
/// libpq variables that would override the explicit `-h`/`-p`/`-U` we pass
/// (PGHOSTADDR wins over `-h`) or change how the client connects.
const LIBPQ_ENV_OVERRIDES: &[&str] = &[
    "PGHOSTADDR",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGOPTIONS",
    "PGSSLMODE",
    "PGREQUIRESSL",
    "PGGSSENCMODE",
    "PGTARGETSESSIONATTRS",
];

/// The default data dir, relative to the working directory.
pub const LOCAL_DATA_DIR: &str = ".statki/pgdata";
/// The default data dir of a root process whose working directory the server user cannot
/// enter (a clone under `/root`, mode 0700), when systemd gives no `STATE_DIRECTORY`.
pub const SYSTEM_DATA_DIR: &str = "/var/lib/statki/pgdata";

/// Where the data lives when the operator names no directory: [`LOCAL_DATA_DIR`] under the
/// working directory, unless this process is root and the server's unprivileged user
/// cannot reach it there. Then `$STATE_DIRECTORY/pgdata` (the state directory systemd gives
/// a service) or [`SYSTEM_DATA_DIR`]. A cluster already initialised under the working
/// directory is always kept, so an upgrade never swaps a database for an empty one.
pub fn default_data_dir() -> Result<PathBuf> {
    let local = std::path::absolute(LOCAL_DATA_DIR)
        .with_context(|| format!("cannot resolve {LOCAL_DATA_DIR}"))?;
    if effective_uid()? != 0 {
        return Ok(local);
    }
    let user = choose_server_user(&local)?;
    // systemd passes a colon-separated list when a unit names several state directories.
    let state_directory = std::env::var_os("STATE_DIRECTORY").and_then(|dirs| {
        let first = dirs.as_bytes().split(|byte| *byte == b':').next()?.to_vec();
        (!first.is_empty()).then(|| PathBuf::from(std::ffi::OsString::from_vec(first)))
    });
    let chosen = pick_default_data_dir(&local, &user, state_directory.as_deref());
    if chosen != local {
        info!(
            user = %user.name,
            unreachable = %local.display(),
            data_dir = %chosen.display(),
            "running as root and PostgreSQL's user cannot enter the working directory: keeping the embedded cluster's data outside it"
        );
    }
    Ok(chosen)
}

/// [`default_data_dir`]'s choice for a root process whose server runs as `user`.
fn pick_default_data_dir(
    local: &Path,
    user: &ServerUser,
    state_directory: Option<&Path>,
) -> PathBuf {
    if local.join("PG_VERSION").exists()
        || check_ancestors_traversable(local, user, "data dir").is_ok()
    {
        return local.to_path_buf();
    }
    state_directory.map_or_else(|| PathBuf::from(SYSTEM_DATA_DIR), |dir| dir.join("pgdata"))
}

/// A PostgreSQL cluster private to this process, listening only on a Unix socket.
///
/// Call [`EmbeddedPostgres::stop`] for an orderly shutdown; if it is dropped without
/// that, `Drop` makes a best-effort immediate shutdown so no cluster is left behind.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    pg: Binaries,
    data_dir: PathBuf,
    socket_dir: PathBuf,
    port: u16,
    /// True until the server has been stopped successfully.
    running: bool,
}

/// The unprivileged account the server runs as when this process is root.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServerUser {
    name: String,
    uid: u32,
    gid: u32,
}

/// The chosen binaries directory plus the identity to run them as.
#[derive(Debug, Clone)]
struct Binaries {
    bindir: PathBuf,
    /// `None` when this process is not root: then the binaries run as ourselves.
    user: Option<ServerUser>,
}

impl EmbeddedPostgres {
    /// Finds binaries, initialises `data_dir` if empty (initdb -A trust, user postgres, UTF8), starts the
    /// server listening only on a Unix socket in a directory under data_dir's parent or a short path
    /// (socket paths must stay under ~100 bytes: if too long, a dir under /tmp named after a hash of the
    /// data dir is used), waits until it accepts connections, and creates database `statki` if missing.
    ///
    /// If a server is already running on `data_dir` it is reused. When this process is root the
    /// server runs as `postgres` (or `nobody` if that user does not exist), or as the owner of an
    /// already-initialised data directory.
    pub async fn start(data_dir: &Path) -> Result<Self> {
        let bindir = find_bindir().await?;
        info!(bindir = %bindir.display(), "using PostgreSQL binaries");

        let data_dir = std::path::absolute(data_dir)
            .with_context(|| format!("cannot resolve data dir {}", data_dir.display()))?;
        let euid = effective_uid()?;
        let user = if euid == 0 {
            let user = choose_server_user(&data_dir)?;
            info!(
                user = %user.name,
                uid = user.uid,
                "running as root: PostgreSQL will run as an unprivileged user"
            );
            Some(user)
        } else {
            None
        };
        let pg = Binaries { bindir, user };

        let data_dir = prepare_data_dir(&data_dir, pg.user.as_ref())?;
        info!(data_dir = %data_dir.display(), "PostgreSQL data dir");

        let server = if let Some((socket_dir, port)) = pg.running_cluster(&data_dir).await? {
            info!(socket_dir = %socket_dir.display(), port, "reusing PostgreSQL server already running on this data dir");
            Self {
                pg,
                data_dir,
                socket_dir,
                port,
                running: true,
            }
        } else {
            let socket_dir = prepare_socket_dir(&data_dir, euid, pg.user.as_ref())?;
            info!(socket_dir = %socket_dir.display(), "PostgreSQL socket dir");
            if data_dir.join("PG_VERSION").exists() {
                pg.check_cluster_version(&data_dir).await?;
            } else {
                pg.initdb(&data_dir).await?;
            }
            pg.start_server(&data_dir, &socket_dir).await?;
            Self {
                pg,
                data_dir,
                socket_dir,
                port: PORT,
                running: true,
            }
        };

        // From here on `server` owns a running cluster, so an error below drops it and
        // Drop shuts the cluster down instead of leaking it.
        server.wait_until_ready().await?;
        server.create_database().await?;
        info!(url = %server.database_url(), "embedded PostgreSQL ready");
        Ok(server)
    }

    /// A sqlx-compatible URL, e.g. `postgres://postgres@localhost/statki?host=/path/to/socketdir&port=5432`.
    ///
    /// `localhost` is only a placeholder: the `host` query parameter points the client at the socket dir.
    pub fn database_url(&self) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost/{DATABASE}?host={}&port={}",
            percent_encode_path(self.socket_dir.as_os_str()),
            self.port
        )
    }

    /// Stops the server with `pg_ctl stop -m fast` and waits for it to exit.
    pub async fn stop(mut self) -> Result<()> {
        let mut cmd = self.pg.command("pg_ctl");
        cmd.arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "fast", "-w", "-t"])
            .arg(STOP_TIMEOUT_SECS.to_string());
        let output = run_output(cmd, "pg_ctl stop").await?;
        if !output.status.success() && self.pg.is_running(&self.data_dir).await? {
            bail!(
                "pg_ctl stop failed for {}: {}",
                self.data_dir.display(),
                describe_output(&output)
            );
        }
        // Either it stopped, or something else already stopped it: both leave nothing running.
        self.running = false;
        info!(data_dir = %self.data_dir.display(), "embedded PostgreSQL stopped");
        Ok(())
    }

    /// Polls `pg_isready` because a reused server may still be starting up or recovering.
    async fn wait_until_ready(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(READY_TIMEOUT_SECS);
        loop {
            let mut cmd = self.pg.command("pg_isready");
            cmd.arg("-q")
                .arg("-h")
                .arg(&self.socket_dir)
                .arg("-p")
                .arg(self.port.to_string())
                .args(["-U", SUPERUSER, "-d", "postgres"]);
            let output = run_output(cmd, "pg_isready").await?;
            if output.status.success() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "PostgreSQL on socket dir {} (port {}) did not accept connections within {READY_TIMEOUT_SECS}s; see {}",
                    self.socket_dir.display(),
                    self.port,
                    self.data_dir.join(LOG_FILE).display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Creates `statki` with `createdb`, treating "already exists" as success so restarts are idempotent.
    async fn create_database(&self) -> Result<()> {
        let mut cmd = self.pg.command("createdb");
        cmd.arg("-h")
            .arg(&self.socket_dir)
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-U", SUPERUSER, DATABASE]);
        let output = run_output(cmd, "createdb").await?;
        if output.status.success() {
            info!(database = DATABASE, "created database");
            return Ok(());
        }
        // LC_ALL=C on the client and lc_messages=C from initdb keep this message in English.
        if String::from_utf8_lossy(&output.stderr).contains("already exists") {
            return Ok(());
        }
        bail!("createdb {DATABASE} failed: {}", describe_output(&output))
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        if !self.running {
            return;
        }
        // Immediate mode skips the shutdown checkpoint: Drop must be quick, and the next
        // start simply runs crash recovery.
        let mut cmd = self.pg.std_command("pg_ctl");
        cmd.arg("stop")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-m", "immediate", "-w", "-t", "10"]);
        match cmd.output() {
            Ok(output) if output.status.success() => {
                info!(data_dir = %self.data_dir.display(), "embedded PostgreSQL stopped on drop");
            }
            Ok(output) => warn!(
                data_dir = %self.data_dir.display(),
                "pg_ctl stop on drop failed: {}",
                describe_output(&output)
            ),
            Err(err) => warn!(
                data_dir = %self.data_dir.display(),
                "could not run pg_ctl stop on drop: {err}"
            ),
        }
    }
}

impl Binaries {
    /// A command for one of the binaries, dropped to the server user when we are root
    /// (initdb, pg_ctl and postgres refuse to run as root).
    fn std_command(&self, program: &str) -> std::process::Command {
        let mut cmd = std::process::Command::new(self.bindir.join(program));
        // The server user may not be able to enter our working directory (e.g. /root),
        // which makes initdb and postgres complain; every path we pass is absolute.
        cmd.current_dir("/").env("LC_ALL", "C").stdin(Stdio::null());
        for var in LIBPQ_ENV_OVERRIDES {
            cmd.env_remove(var);
        }
        if let Some(user) = &self.user {
            cmd.uid(user.uid).gid(user.gid);
        }
        cmd
    }

    /// Async form of [`Binaries::std_command`].
    fn command(&self, program: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::from(self.std_command(program));
        cmd.kill_on_drop(true);
        cmd
    }

    /// Whether `pg_ctl status` sees a live server for `data_dir`.
    async fn is_running(&self, data_dir: &Path) -> Result<bool> {
        let mut cmd = self.command("pg_ctl");
        cmd.arg("status").arg("-D").arg(data_dir);
        let output = run_output(cmd, "pg_ctl status").await?;
        Ok(output.status.success())
    }

    /// The socket dir and port of a server already running on `data_dir`, read from
    /// postmaster.pid, or `None` if no server runs there (a stale pid file is left to pg_ctl).
    async fn running_cluster(&self, data_dir: &Path) -> Result<Option<(PathBuf, u16)>> {
        let pid_file = data_dir.join("postmaster.pid");
        if !pid_file.exists() || !self.is_running(data_dir).await? {
            return Ok(None);
        }
        let contents = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("cannot read {}", pid_file.display()))?;
        parse_postmaster_pid(&contents).map(Some).ok_or_else(|| {
            anyhow!(
                "a PostgreSQL server is already running on {} but {} names no Unix socket directory; stop it (pg_ctl stop -D {}) and start again",
                data_dir.display(),
                pid_file.display(),
                data_dir.display()
            )
        })
    }

    /// Initialises an empty data dir: trust auth is safe because the socket dir is private.
    async fn initdb(&self, data_dir: &Path) -> Result<()> {
        info!(data_dir = %data_dir.display(), "initialising PostgreSQL data dir");
        let mut cmd = self.command("initdb");
        cmd.arg("-D")
            .arg(data_dir)
            .args(["-A", "trust", "-U", SUPERUSER, "-E", "UTF8"])
            // Hosts often lack the locale named by LANG, which makes initdb fail; the C
            // locale always exists and works with UTF8.
            .arg("--locale=C");
        let output = run_output(cmd, "initdb").await?;
        if !output.status.success() {
            bail!(
                "initdb failed for {}: {}",
                data_dir.display(),
                describe_output(&output)
            );
        }
        Ok(())
    }

    /// Refuses a cluster from another major version up front, because the server's own
    /// complaint would only appear in the log.
    async fn check_cluster_version(&self, data_dir: &Path) -> Result<()> {
        let version_file = data_dir.join("PG_VERSION");
        let cluster = std::fs::read_to_string(&version_file)
            .with_context(|| format!("cannot read {}", version_file.display()))?;
        let cluster = cluster.trim();
        let mut cmd = self.command("pg_ctl");
        cmd.arg("--version");
        let output = run_output(cmd, "pg_ctl --version").await?;
        let reported = String::from_utf8_lossy(&output.stdout);
        match parse_major_version(&reported) {
            Some(binaries) if binaries != cluster => bail!(
                "data dir {} was initialised by PostgreSQL {cluster} but the binaries in {} are PostgreSQL {binaries}; set PG_BINDIR to PostgreSQL {cluster}'s bin directory, upgrade the cluster with pg_upgrade, or use another data dir",
                data_dir.display(),
                self.bindir.display()
            ),
            // An unparsable version string is not worth refusing to start over.
            _ => Ok(()),
        }
    }

    /// `pg_ctl start`, listening on the Unix socket only; `-w` waits until it accepts connections.
    async fn start_server(&self, data_dir: &Path, socket_dir: &Path) -> Result<()> {
        let log = data_dir.join(LOG_FILE);
        // pg_ctl hands -o to the postmaster through /bin/sh, so the path must be shell-quoted.
        let options = format!(
            "-c listen_addresses='' -k {} -p {PORT}",
            shell_quote(socket_dir.as_os_str())
        );
        info!(data_dir = %data_dir.display(), socket_dir = %socket_dir.display(), log = %log.display(), "starting PostgreSQL");
        let mut cmd = self.command("pg_ctl");
        cmd.arg("-D")
            .arg(data_dir)
            .arg("-w")
            .arg("-t")
            .arg(READY_TIMEOUT_SECS.to_string())
            .arg("-l")
            .arg(&log)
            .arg("start")
            .arg("-o")
            .arg(options);
        let output = run_output(cmd, "pg_ctl start").await?;
        if !output.status.success() {
            bail!(
                "pg_ctl start failed for {}: {}\nlast lines of {}:\n{}",
                data_dir.display(),
                describe_output(&output),
                log.display(),
                tail_of_file(&log, 20)
            );
        }
        Ok(())
    }
}

/// Runs a command to completion, capturing its output; only failure to spawn is an error.
async fn run_output(mut cmd: tokio::process::Command, what: &str) -> Result<Output> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.output()
        .await
        .with_context(|| format!("cannot run {what}"))
}

/// Exit status plus trimmed stderr/stdout, for error messages.
fn describe_output(output: &Output) -> String {
    let mut text = output.status.to_string();
    for stream in [&output.stderr, &output.stdout] {
        let stream = String::from_utf8_lossy(stream);
        let stream = stream.trim();
        if !stream.is_empty() {
            let _ = write!(text, "\n{stream}");
        }
    }
    text
}

/// The last `lines` lines of a file, or a note that it could not be read.
fn tail_of_file(path: &Path, lines: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(cannot read log: {err})"),
    }
}

// ---------------------------------------------------------------------------
// Binary discovery

/// Finds the directory holding `initdb` and `pg_ctl` from the environment and the machine.
async fn find_bindir() -> Result<PathBuf> {
    let env_bindir = std::env::var_os("PG_BINDIR")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    let pg_config_bindir = if env_bindir.is_some() {
        None
    } else {
        pg_config_bindir().await
    };
    discover_bindir(
        env_bindir.as_deref(),
        pg_config_bindir.as_deref(),
        Path::new(VERSIONED_BIN_ROOT),
    )
}

/// `pg_config --bindir` from PATH, if pg_config exists and answers.
async fn pg_config_bindir() -> Option<PathBuf> {
    let output = tokio::process::Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .output()
        .await
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// Picks the binaries directory from the given candidates, in order:
/// `env_bindir` (PG_BINDIR), `pg_config_bindir`, then the highest version under
/// `versioned_root` (`<root>/<version>/bin`). Each must contain both `initdb` and `pg_ctl`.
///
/// A PG_BINDIR that lacks them is an error rather than skipped, so a typo in an explicit
/// setting never silently selects other binaries.
fn discover_bindir(
    env_bindir: Option<&Path>,
    pg_config_bindir: Option<&Path>,
    versioned_root: &Path,
) -> Result<PathBuf> {
    if let Some(dir) = env_bindir {
        if has_server_binaries(dir) {
            return Ok(dir.to_path_buf());
        }
        bail!(
            "PG_BINDIR={} does not contain both initdb and pg_ctl: {NO_BINARIES_HELP}",
            dir.display()
        );
    }
    // On Debian pg_config may report /usr/bin, which holds client tools but no initdb.
    if let Some(dir) = pg_config_bindir.filter(|dir| has_server_binaries(dir)) {
        return Ok(dir.to_path_buf());
    }
    if let Some(dir) = highest_versioned_bindir(versioned_root) {
        return Ok(dir);
    }
    bail!(
        "no PostgreSQL server binaries found (looked at pg_config --bindir and {}/*/bin): {NO_BINARIES_HELP}",
        versioned_root.display()
    )
}

/// The `bin` dir of the highest version under `root` that has the server binaries.
fn highest_versioned_bindir(root: &Path) -> Option<PathBuf> {
    std::fs::read_dir(root)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = parse_version_dir(&entry.file_name().to_string_lossy())?;
            let bin = entry.path().join("bin");
            has_server_binaries(&bin).then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin)
}

/// `"15"` → `[15]`, `"9.6"` → `[9, 6]`; anything else is not a version directory.
fn parse_version_dir(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

fn has_server_binaries(dir: &Path) -> bool {
    is_executable_file(&dir.join("initdb")) && is_executable_file(&dir.join("pg_ctl"))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The major version from `pg_ctl (PostgreSQL) 15.14 (Debian ...)`: `"15"`, or `"9.6"` before 10.
fn parse_major_version(reported: &str) -> Option<String> {
    let version = reported
        .split("(PostgreSQL)")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().filter(|part| !part.is_empty())?;
    if major.parse::<u32>().ok()? >= 10 {
        Some(major.to_owned())
    } else {
        Some(format!("{major}.{}", parts.next()?))
    }
}

// ---------------------------------------------------------------------------
// Users and permissions

/// The effective uid, from /proc (Linux) or `id -u` elsewhere.
fn effective_uid() -> Result<u32> {
    if let Ok(status) = std::fs::read_to_string("/proc/self/status")
        && let Some(uid) = parse_effective_uid(&status)
    {
        return Ok(uid);
    }
    let output = std::process::Command::new("id")
        .arg("-u")
        .output()
        .context("cannot determine the effective uid (no /proc/self/status, and `id -u` failed)")?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .context("cannot parse the output of `id -u`")
}

/// The second field of the `Uid:` line (real, effective, saved, filesystem).
fn parse_effective_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Parses `/etc/passwd`-format text into (name, uid, gid) entries.
fn passwd_entries(passwd: &str) -> impl Iterator<Item = ServerUser> + '_ {
    passwd.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let _password = fields.next()?;
        let uid = fields.next()?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some(ServerUser {
            name: name.to_owned(),
            uid,
            gid,
        })
    })
}

/// When root, picks who runs the server: the owner of an already-initialised data dir
/// (so an existing cluster keeps working), else `postgres`, else `nobody`.
fn choose_server_user(data_dir: &Path) -> Result<ServerUser> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if data_dir.join("PG_VERSION").exists() {
        let meta = std::fs::metadata(data_dir)
            .with_context(|| format!("cannot stat data dir {}", data_dir.display()))?;
        if meta.uid() == 0 {
            bail!(
                "data dir {} holds a PostgreSQL cluster owned by root, which PostgreSQL refuses to run; chown -R postgres: {} (or use another STATKI_DATA_DIR)",
                data_dir.display(),
                data_dir.display()
            );
        }
        let name = passwd_entries(&passwd)
            .find(|user| user.uid == meta.uid())
            .map_or_else(|| format!("uid {}", meta.uid()), |user| user.name);
        return Ok(ServerUser {
            name,
            uid: meta.uid(),
            gid: meta.gid(),
        });
    }
    select_unprivileged_user(&passwd).ok_or_else(|| {
        anyhow!(
            "this process runs as root, which PostgreSQL refuses, and neither user `postgres` nor `nobody` exists in /etc/passwd to run it as; create a `postgres` user, run the service as a non-root user, or set DATABASE_URL to an existing server"
        )
    })
}

/// `postgres` if present in the passwd text, else `nobody`.
fn select_unprivileged_user(passwd: &str) -> Option<ServerUser> {
    ["postgres", "nobody"].iter().find_map(|wanted| {
        passwd_entries(passwd).find(|user| user.name == *wanted && user.uid != 0)
    })
}

/// Whether `user` may enter a directory with this metadata, by POSIX mode bits (ACLs are
/// ignored). Only the primary group counts, because the child drops supplementary groups.
fn can_traverse(meta: &std::fs::Metadata, user: &ServerUser) -> bool {
    let mode = meta.mode();
    if meta.uid() == user.uid {
        mode & 0o100 != 0
    } else if meta.gid() == user.gid {
        mode & 0o010 != 0
    } else {
        mode & 0o001 != 0
    }
}

/// Errors naming the first existing ancestor of `dir` that `user` cannot enter. Missing
/// ancestors are skipped: [`create_dir_chain`] will create them owned by `user`.
fn check_ancestors_traversable(dir: &Path, user: &ServerUser, what: &str) -> Result<()> {
    for ancestor in dir.ancestors().skip(1) {
        let meta = match std::fs::metadata(ancestor) {
            Ok(meta) => meta,
            Err(err) if err.kind() == ErrorKind::NotFound => continue,
            Err(err) => {
                return Err(err).with_context(|| format!("cannot stat {}", ancestor.display()));
            }
        };
        if !can_traverse(&meta, user) {
            bail!(
                "the {what} {} is not reachable by user `{}` (uid {}), which PostgreSQL must run as because this process is root: {} (mode {:o}, owner uid {}) does not let that user enter it. Set STATKI_DATA_DIR to a directory outside {} (e.g. under /var/lib or /srv), or grant search permission on it (chmod o+x {}), or set DATABASE_URL to an existing server",
                dir.display(),
                user.name,
                user.uid,
                ancestor.display(),
                meta.mode() & 0o7777,
                meta.uid(),
                ancestor.display(),
                ancestor.display()
            );
        }
    }
    Ok(())
}

/// Creates `dir` and any missing parents; the ones created here are chowned to `owner` so
/// the server user can use them. Pre-existing directories are never changed.
fn create_dir_chain(dir: &Path, owner: Option<&ServerUser>) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|path| !path.as_os_str().is_empty() && !path.exists())
        .collect();
    for path in missing.into_iter().rev() {
        match std::fs::create_dir(path) {
            Ok(()) => {
                if let Some(user) = owner {
                    chown(path, Some(user.uid), Some(user.gid)).with_context(|| {
                        format!("cannot chown {} to {}", path.display(), user.name)
                    })?;
                }
            }
            // Someone else created it concurrently; it is theirs, leave it be.
            Err(err) if err.kind() == ErrorKind::AlreadyExists => {}
            Err(err) => {
                return Err(err).with_context(|| format!("cannot create {}", path.display()));
            }
        }
    }
    Ok(())
}

/// Creates the data dir if needed and makes it usable by the server: owned by the server
/// user and mode 0700 (PostgreSQL refuses group/world access). Returns its canonical path.
fn prepare_data_dir(data_dir: &Path, user: Option<&ServerUser>) -> Result<PathBuf> {
    // Checked before creating anything so a refusal leaves no directories behind.
    if let Some(user) = user {
        check_ancestors_traversable(data_dir, user, "data dir")?;
    }
    create_dir_chain(data_dir, user)?;
    let data_dir = std::fs::canonicalize(data_dir)
        .with_context(|| format!("cannot resolve data dir {}", data_dir.display()))?;
    let meta = std::fs::metadata(&data_dir)
        .with_context(|| format!("cannot stat data dir {}", data_dir.display()))?;
    if !meta.is_dir() {
        bail!("data dir {} is not a directory", data_dir.display());
    }
    let initialised = data_dir.join("PG_VERSION").exists();
    if !initialised && !is_empty_dir(&data_dir)? {
        bail!(
            "data dir {} is neither empty nor a PostgreSQL data directory; point STATKI_DATA_DIR at an empty or new directory",
            data_dir.display()
        );
    }
    if let Some(user) = user {
        // Again on the canonical path: a symlink may lead somewhere the user cannot enter.
        check_ancestors_traversable(&data_dir, user, "data dir")?;
        // An initialised dir already belongs to `user` (choose_server_user picked its owner).
        if !initialised && meta.uid() != user.uid {
            chown(&data_dir, Some(user.uid), Some(user.gid)).with_context(|| {
                format!(
                    "cannot chown data dir {} to {}",
                    data_dir.display(),
                    user.name
                )
            })?;
        }
    }
    if !initialised && meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot chmod 0700 data dir {}", data_dir.display()))?;
    }
    Ok(data_dir)
}

fn is_empty_dir(dir: &Path) -> Result<bool> {
    Ok(std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .next()
        .is_none())
}

// ---------------------------------------------------------------------------
// Socket directory

/// The socket file's path length for a socket dir (`<dir>/.s.PGSQL.<port>`).
fn socket_path_len(socket_dir: &Path) -> usize {
    socket_dir.as_os_str().len() + format!("/.s.PGSQL.{PORT}").len()
}

/// The preferred socket dir: `<parent>/<name>-socket` beside the data dir, unless that makes
/// the socket path too long (or there is no parent), in which case the /tmp fallback.
fn socket_dir_for(data_dir: &Path) -> PathBuf {
    let beside = data_dir
        .parent()
        .zip(data_dir.file_name())
        .map(|(parent, name)| {
            let mut dir_name = name.to_os_string();
            dir_name.push("-socket");
            parent.join(dir_name)
        });
    match beside {
        Some(dir) if socket_path_len(&dir) <= MAX_SOCKET_PATH => dir,
        _ => fallback_socket_dir(data_dir),
    }
}

/// `/tmp/statki-pg-<hash>`: short, and stable per data dir so restarts find the same place.
/// FNV-1a rather than std's hasher because the name must not change across Rust releases.
fn fallback_socket_dir(data_dir: &Path) -> PathBuf {
    let hash = data_dir
        .as_os_str()
        .as_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    PathBuf::from(format!("/tmp/statki-pg-{hash:016x}"))
}

/// Creates the socket dir, owned by the server user with mode 0700: with trust
/// authentication, whoever can reach the socket is superuser, so only that user (and root)
/// may. Falls back to /tmp when the data dir's parent is not writable.
fn prepare_socket_dir(data_dir: &Path, euid: u32, user: Option<&ServerUser>) -> Result<PathBuf> {
    let preferred = socket_dir_for(data_dir);
    let socket_dir = match create_dir_chain(&preferred, user) {
        Ok(()) => preferred,
        Err(err) => {
            let fallback = fallback_socket_dir(data_dir);
            if fallback == preferred {
                return Err(err);
            }
            warn!(
                "cannot use socket dir {} ({err:#}); using {} instead",
                preferred.display(),
                fallback.display()
            );
            create_dir_chain(&fallback, user)?;
            fallback
        }
    };
    // symlink_metadata, so a link planted in /tmp cannot redirect the socket elsewhere.
    let meta = std::fs::symlink_metadata(&socket_dir)
        .with_context(|| format!("cannot stat socket dir {}", socket_dir.display()))?;
    if !meta.is_dir() {
        bail!(
            "socket dir {} exists but is not a directory; remove it",
            socket_dir.display()
        );
    }
    let owner_ok = meta.uid() == euid || user.is_some_and(|user| meta.uid() == user.uid);
    if !owner_ok {
        bail!(
            "socket dir {} belongs to uid {}, not to this process or the PostgreSQL user; remove it and start again",
            socket_dir.display(),
            meta.uid()
        );
    }
    if let Some(user) = user {
        check_ancestors_traversable(&socket_dir, user, "socket dir")?;
        if meta.uid() != user.uid || meta.gid() != user.gid {
            chown(&socket_dir, Some(user.uid), Some(user.gid)).with_context(|| {
                format!(
                    "cannot chown socket dir {} to {}",
                    socket_dir.display(),
                    user.name
                )
            })?;
        }
    }
    if meta.mode() & 0o777 != 0o700 {
        std::fs::set_permissions(&socket_dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot chmod 0700 socket dir {}", socket_dir.display()))?;
    }
    Ok(socket_dir)
}

/// Port and socket dir from postmaster.pid (line 4: port, line 5: first socket dir).
fn parse_postmaster_pid(contents: &str) -> Option<(PathBuf, u16)> {
    let mut lines = contents.lines().skip(3);
    let port = lines.next()?.trim().parse().ok()?;
    let socket_dir = lines.next()?.trim();
    (!socket_dir.is_empty()).then(|| (PathBuf::from(socket_dir), port))
}

// ---------------------------------------------------------------------------
// Quoting

/// Single-quotes for /bin/sh: `'` becomes `'\''`.
fn shell_quote(value: &OsStr) -> String {
    format!("'{}'", value.to_string_lossy().replace('\'', r"'\''"))
}

/// Percent-encodes a path for a URL query value, keeping `/` and unreserved characters.
fn percent_encode_path(path: &OsStr) -> String {
    let mut encoded = String::with_capacity(path.len());
    for &byte in path.as_bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system temp dir, removed by the caller.
    fn scratch_dir(label: &str) -> PathBuf {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "statki-embedded-pg-unit-{label}-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn fake_bindir(dir: &Path, programs: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        for program in programs {
            let path = dir.join(program);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn empty_pg_bindir_and_nothing_else_gives_actionable_error() {
        let root = scratch_dir("nobin");
        let empty_bindir = root.join("empty");
        let versioned_root = root.join("versions");
        std::fs::create_dir_all(&empty_bindir).unwrap();
        std::fs::create_dir_all(&versioned_root).unwrap();

        let err = discover_bindir(Some(&empty_bindir), None, &versioned_root)
            .unwrap_err()
            .to_string();
        assert!(err.contains(NO_BINARIES_HELP), "{err}");
        assert!(err.contains(&empty_bindir.display().to_string()), "{err}");

        let err = discover_bindir(None, Some(&empty_bindir), &versioned_root)
            .unwrap_err()
            .to_string();
        assert!(err.contains(
            "install PostgreSQL server binaries (Debian: apt-get install postgresql), or set PG_BINDIR to the directory containing initdb and pg_ctl, or set DATABASE_URL to an existing server"
        ), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn discovery_order_and_highest_complete_version() {
        let root = scratch_dir("order");
        let versions = root.join("versions");
        fake_bindir(&versions.join("9.6/bin"), &["initdb", "pg_ctl"]);
        fake_bindir(&versions.join("14/bin"), &["initdb", "pg_ctl"]);
        fake_bindir(&versions.join("16/bin"), &["initdb", "pg_ctl"]);
        fake_bindir(&versions.join("17/bin"), &["initdb"]);
        fake_bindir(&versions.join("notaversion/bin"), &["initdb", "pg_ctl"]);
        let client_only = root.join("usr-bin");
        fake_bindir(&client_only, &["pg_config", "psql"]);
        let explicit = root.join("explicit");
        fake_bindir(&explicit, &["initdb", "pg_ctl"]);

        // pg_config pointing at a client-only dir is skipped.
        assert_eq!(
            discover_bindir(None, Some(&client_only), &versions).unwrap(),
            versions.join("16/bin")
        );
        assert_eq!(
            discover_bindir(None, Some(&explicit), &versions).unwrap(),
            explicit
        );
        assert_eq!(
            discover_bindir(Some(&explicit), Some(&client_only), &versions).unwrap(),
            explicit
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn parses_versions() {
        assert_eq!(
            parse_major_version("pg_ctl (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)\n"),
            Some("15".into())
        );
        assert_eq!(
            parse_major_version("pg_ctl (PostgreSQL) 17beta1"),
            Some("17".into())
        );
        assert_eq!(
            parse_major_version("pg_ctl (PostgreSQL) 9.6.24"),
            Some("9.6".into())
        );
        assert_eq!(parse_major_version("nonsense"), None);
        assert!(parse_version_dir("9.6") < parse_version_dir("10"));
        assert!(parse_version_dir("16") > parse_version_dir("9.6"));
        assert_eq!(parse_version_dir("common"), None);
    }

    #[test]
    fn parses_uid_and_passwd() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_effective_uid(status), Some(0));
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\npostgres:x:101:104::/var/lib/postgresql:/bin/bash\n";
        assert_eq!(
            select_unprivileged_user(passwd),
            Some(ServerUser {
                name: "postgres".into(),
                uid: 101,
                gid: 104
            })
        );
        let without_postgres = "root:x:0:0::/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n";
        assert_eq!(
            select_unprivileged_user(without_postgres).map(|user| user.name),
            Some("nobody".into())
        );
        assert_eq!(
            select_unprivileged_user("root:x:0:0::/root:/bin/sh\n"),
            None
        );
    }

    #[test]
    fn socket_dir_is_beside_short_data_dirs_and_hashed_for_long_ones() {
        assert_eq!(
            socket_dir_for(Path::new("/var/lib/statki/pgdata")),
            PathBuf::from("/var/lib/statki/pgdata-socket")
        );
        let long = PathBuf::from(format!("/srv/{}/pgdata", "x".repeat(120)));
        let fallback = socket_dir_for(&long);
        assert!(fallback.starts_with("/tmp"), "{}", fallback.display());
        assert!(socket_path_len(&fallback) <= MAX_SOCKET_PATH);
        assert_eq!(fallback, socket_dir_for(&long), "stable per data dir");
        assert_ne!(
            fallback,
            socket_dir_for(&PathBuf::from(format!("/srv/{}/other", "x".repeat(120))))
        );
        assert!(socket_dir_for(Path::new("/")).starts_with("/tmp"));
    }

    #[test]
    fn root_default_leaves_working_directories_the_server_user_cannot_enter() {
        let root = scratch_dir("default");
        let stranger = ServerUser {
            name: "stranger".into(),
            uid: 4242,
            gid: 4242,
        };
        let open = root.join("open");
        let closed = root.join("closed");
        std::fs::create_dir_all(&open).unwrap();
        std::fs::create_dir_all(&closed).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();

        let reachable = open.join(LOCAL_DATA_DIR);
        assert_eq!(
            pick_default_data_dir(&reachable, &stranger, None),
            reachable
        );
        let unreachable = closed.join(LOCAL_DATA_DIR);
        assert_eq!(
            pick_default_data_dir(&unreachable, &stranger, None),
            PathBuf::from(SYSTEM_DATA_DIR)
        );
        assert_eq!(
            pick_default_data_dir(&unreachable, &stranger, Some(Path::new("/srv/state"))),
            PathBuf::from("/srv/state/pgdata")
        );
        // An existing cluster stays where it is, reachable or not.
        std::fs::create_dir_all(&unreachable).unwrap();
        std::fs::write(unreachable.join("PG_VERSION"), "15\n").unwrap();
        assert_eq!(
            pick_default_data_dir(&unreachable, &stranger, None),
            unreachable
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn parses_postmaster_pid() {
        let pid = "1234\n/data\n1700000000\n5432\n/tmp/sock\n\n  12345     67890\nready   \n";
        assert_eq!(
            parse_postmaster_pid(pid),
            Some((PathBuf::from("/tmp/sock"), 5432))
        );
        assert_eq!(
            parse_postmaster_pid("1234\n/data\n1700000000\n5432\n\n"),
            None
        );
    }

    #[test]
    fn quotes_and_encodes() {
        assert_eq!(shell_quote(OsStr::new("/a b/it's")), r"'/a b/it'\''s'");
        assert_eq!(
            percent_encode_path(OsStr::new("/tmp/a b&c=d")),
            "/tmp/a%20b%26c%3Dd"
        );
    }
}
