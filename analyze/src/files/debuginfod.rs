//! debuginfod: binaries and debug files fetched by build id from the servers the user named
//! in `DEBUGINFOD_URLS` (and nowhere else), cached as elfutils caches them
//! (`$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
//! `~/.cache/debuginfod_client`: `BUILDID/executable`, `BUILDID/debuginfo`), so that a later
//! run, gdb or perf find them there too.
//!
//! Each request has a timeout (`DEBUGINFOD_TIMEOUT` seconds, default 10, to connect and
//! between reads); a server that does not answer is not asked again in this run, so a server
//! that is down costs one timeout and a warning.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// What to fetch of a build id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Executable,
    DebugInfo,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Executable => "executable",
            Kind::DebugInfo => "debuginfo",
        }
    }
}

/// Files larger than this are not taken from a server.
const MAX_FILE: u64 = 4 << 30;

pub struct Client {
    urls: Vec<String>,
    pub cache: PathBuf,
    timeout: Duration,
    /// Servers that failed to answer: not asked again.
    down: Mutex<Vec<String>>,
    /// What went wrong, for the warnings.
    pub problems: Mutex<Vec<String>>,
}

impl Client {
    /// A client for the servers of `DEBUGINFOD_URLS`, or `None` when it names none.
    pub fn from_env() -> Option<Client> {
        let urls: Vec<String> = std::env::var("DEBUGINFOD_URLS")
            .ok()?
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let cache = std::env::var_os("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("XDG_CACHE_HOME")
                    .map(|d| PathBuf::from(d).join("debuginfod_client"))
            })
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/debuginfod_client"))
            })?;
        let timeout = std::env::var("DEBUGINFOD_TIMEOUT")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(10);
        Some(Client {
            urls,
            cache,
            timeout: Duration::from_secs(timeout.max(1)),
            down: Mutex::new(Vec::new()),
            problems: Mutex::new(Vec::new()),
        })
    }

    /// Where the file of `build_id` (hex) is cached.
    pub fn cached(&self, build_id: &str, kind: Kind) -> PathBuf {
        self.cache.join(build_id).join(kind.name())
    }

    /// The file of `build_id`, from the cache or fetched from the first server that has it.
    pub fn fetch(&self, build_id: &str, kind: Kind) -> Option<PathBuf> {
        let path = self.cached(build_id, kind);
        if path.is_file() {
            return Some(path);
        }
        for url in &self.urls {
            if self.down.lock().unwrap().contains(url) {
                continue;
            }
            let address = format!("{url}/buildid/{build_id}/{}", kind.name());
            match self.get(&address, &path) {
                Ok(true) => return Some(path),
                Ok(false) => {} // 404: this server does not have it
                Err(e) => {
                    self.down.lock().unwrap().push(url.clone());
                    self.problems.lock().unwrap().push(format!(
                        "debuginfod {url}: {e}; not asked again in this run"
                    ));
                }
            }
        }
        None
    }

    /// GETs `address` into `to` (atomically: a partial download is never seen). `Ok(false)`
    /// when the server does not have it.
    fn get(&self, address: &str, to: &Path) -> Result<bool, String> {
        let agent = ureq::Agent::config_builder()
            .timeout_connect(Some(self.timeout))
            .timeout_recv_response(Some(self.timeout))
            .timeout_recv_body(Some(self.timeout.max(Duration::from_secs(60))))
            .http_status_as_error(false)
            .build()
            .new_agent();
        let response = agent.get(address).call().map_err(|e| e.to_string())?;
        match response.status().as_u16() {
            200 => {}
            404 => return Ok(false),
            s => return Err(format!("HTTP {s} for {address}")),
        }
        let dir = to.parent().expect("cache paths have a directory");
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let tmp = dir.join(format!(".tmp.{}", std::process::id()));
        let mut file =
            std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        let mut body = response.into_body().into_reader().take(MAX_FILE + 1);
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        loop {
            let n = body.read(&mut buf).map_err(|e| format!("{address}: {e}"))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > MAX_FILE {
                let _ = std::fs::remove_file(&tmp);
                return Err(format!("{address}: larger than {} GiB", MAX_FILE >> 30));
            }
            file.write_all(&buf[..n])
                .map_err(|e| format!("{}: {e}", tmp.display()))?;
        }
        drop(file);
        std::fs::rename(&tmp, to).map_err(|e| format!("{}: {e}", to.display()))?;
        Ok(true)
    }
}
