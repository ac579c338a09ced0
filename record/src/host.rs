//! What a recording asks of the system: signals, tracefs, the clock, the output file's owner.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use anyhow::Context;

/// Signal number received (SIGINT/SIGTERM), 0 if none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
}

/// SIGUSR2 came: the next file, with `--switch-output=signal`.
static SWITCH: AtomicBool = AtomicBool::new(false);

extern "C" fn on_switch_signal(_: libc::c_int) {
    SWITCH.store(true, Ordering::SeqCst);
}

/// SIGINT and SIGTERM end the recording; SIGUSR2 asks for the next file of a rotated one
/// (perf's habit) and is otherwise ignored, by a handler rather than SIG_IGN, which the
/// workload would inherit.
pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGUSR2,
            on_switch_signal as *const () as libc::sighandler_t,
        )
    };
}

/// Whether SIGUSR2 came since the last call.
pub fn take_switch_request() -> bool {
    SWITCH.swap(false, Ordering::SeqCst)
}

/// The signal received (SIGINT/SIGTERM), 0 if none.
pub fn signal_received() -> i32 {
    SIGNAL.load(Ordering::SeqCst)
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn mount_tracefs() {
    let events = Path::new("/sys/kernel/tracing/events");
    // SAFETY: geteuid has no preconditions.
    if events.exists() || unsafe { libc::geteuid() } != 0 {
        return;
    }
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    // SAFETY: valid NUL-terminated strings.
    unsafe {
        libc::mount(
            c("nodev").as_ptr(),
            c("/sys/kernel/tracing").as_ptr(),
            c("tracefs").as_ptr(),
            0,
            std::ptr::null(),
        )
    };
}

/// Moves an existing output file to FILE.old, as perf does.
pub fn rotate_old(path: &Path) -> anyhow::Result<()> {
    if path.exists() {
        let mut old = path.as_os_str().to_owned();
        old.push(".old");
        std::fs::rename(path, &old).with_context(|| {
            format!(
                "cannot rename {} to {}",
                path.display(),
                PathBuf::from(&old).display()
            )
        })?;
    }
    Ok(())
}

/// Gives the file to the user who ran sudo, so that recordings are theirs (and stay 0600).
pub fn chown_to_invoking_user(path: &Path) {
    let (Ok(uid), Ok(gid)) = (std::env::var("SUDO_UID"), std::env::var("SUDO_GID")) else {
        return;
    };
    let (Ok(uid), Ok(gid)) = (uid.parse::<u32>(), gid.parse::<u32>()) else {
        return;
    };
    let _ = std::os::unix::fs::chown(path, Some(uid), Some(gid));
}

/// The filesystem `path` is on, as people name it: its source and mount point
/// (`/dev/vda1 at /`, `tmpfs at /mnt/small`), from /proc/self/mountinfo.
pub fn device_of(path: &Path) -> String {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return dir.display().to_string();
    };
    // 36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    let best = info
        .lines()
        .filter_map(|l| {
            let mount_point = l.split(' ').nth(4)?;
            let (_, tail) = l.split_once(" - ")?;
            let mut t = tail.split(' ');
            let (fstype, source) = (t.next()?, t.next()?);
            dir.starts_with(mount_point)
                .then_some((mount_point.len(), mount_point, fstype, source))
        })
        .max_by_key(|m| m.0);
    match best {
        Some((_, mount_point, fstype, source)) if source != fstype => {
            format!("{source} ({fstype} at {mount_point})")
        }
        Some((_, mount_point, fstype, _)) => format!("{fstype} at {mount_point}"),
        None => dir.display().to_string(),
    }
}

pub fn uname() -> (String, String) {
    // SAFETY: zeroed utsname is a valid out buffer.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut u) };
    let s = |f: &[libc::c_char]| {
        f.iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8 as char)
            .collect::<String>()
    };
    (s(&u.nodename), s(&u.release))
}
