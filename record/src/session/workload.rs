//! The command to record: forked, held until the probes are attached, then exec'd.

use std::ffi::CString;
use std::io;

/// A forked child waiting to exec the workload. Dropped without [`HeldChild::release`] (record
/// failed to start), it is killed: the workload never runs unrecorded.
pub struct HeldChild {
    pub pid: i32,
    /// Writing to (or closing) this releases the child.
    go: libc::c_int,
    /// The child writes its exec errno here; closed by exec on success.
    exec_status: libc::c_int,
}

/// Forks a child that waits on a pipe, then execs `argv` (searching PATH) with record's
/// environment, `env` set over it.
pub fn spawn_held(argv: &[String], env: &[(String, String)]) -> io::Result<HeldChild> {
    let cstring = |s: Vec<u8>| {
        CString::new(s)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))
    };
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| cstring(a.clone().into_bytes()))
        .collect::<io::Result<_>>()?;
    let mut ptrs: Vec<*const libc::c_char> = cargs.iter().map(|c| c.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let cenv: Vec<CString> = environment(env)
        .into_iter()
        .map(cstring)
        .collect::<io::Result<_>>()?;
    let mut envp: Vec<*const libc::c_char> = cenv.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let (go_r, go_w) = pipe(0)?;
    let (st_r, st_w) = pipe(libc::O_CLOEXEC)?;
    // SAFETY: between fork and exec the child calls only async-signal-safe functions
    // (read, close, execvpe, write, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            libc::close(go_w);
            libc::close(st_r);
            let mut b = [0u8; 1];
            // End of file instead of the go byte: record is gone, so the workload never runs.
            if libc::read(go_r, b.as_mut_ptr().cast(), 1) != 1 {
                libc::_exit(127);
            }
            libc::close(go_r);
            libc::execvpe(ptrs[0], ptrs.as_ptr(), envp.as_ptr());
            let err = *libc::__errno_location();
            libc::write(st_w, (&err as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
    unsafe {
        libc::close(go_r);
        libc::close(st_w);
    }
    Ok(HeldChild {
        pid,
        go: go_w,
        exec_status: st_r,
    })
}

/// record's environment as `NAME=value` entries, with `set` replacing or adding some.
fn environment(set: &[(String, String)]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut env: Vec<Vec<u8>> = std::env::vars_os()
        .filter(|(k, _)| !set.iter().any(|(s, _)| k.as_bytes() == s.as_bytes()))
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .collect();
    env.extend(set.iter().map(|(k, v)| format!("{k}={v}").into_bytes()));
    env
}

fn pipe(flags: libc::c_int) -> io::Result<(libc::c_int, libc::c_int)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

impl HeldChild {
    /// Lets the child exec; returns the exec error if it failed.
    pub fn release(mut self) -> io::Result<()> {
        let mut err = [0u8; 4];
        // SAFETY: plain syscalls on descriptors we own.
        let n = unsafe {
            libc::write(self.go, b"g".as_ptr().cast(), 1);
            libc::close(self.go);
            let n = libc::read(self.exec_status, err.as_mut_ptr().cast(), 4);
            libc::close(self.exec_status);
            n
        };
        self.go = -1;
        if n == 4 {
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(err)));
        }
        Ok(())
    }
}

impl Drop for HeldChild {
    fn drop(&mut self) {
        if self.go < 0 {
            return;
        }
        // SAFETY: our own child, still held (not reaped), and descriptors we own.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::close(self.go);
            libc::close(self.exec_status);
        }
    }
}

/// How a child ended, as a shell reports it: exit code, or 128 + signal.
pub fn try_wait(pid: i32) -> Option<i32> {
    wait_for(pid, libc::WNOHANG)
}

/// Waits for a child known to be exiting (its thread group is dead).
pub fn wait_exiting(pid: i32) -> Option<i32> {
    wait_for(pid, 0)
}

fn wait_for(pid: i32, flags: i32) -> Option<i32> {
    let mut status = 0;
    // SAFETY: waitpid on our own child.
    let r = unsafe { libc::waitpid(pid, &mut status, flags) };
    if r != pid {
        return None;
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}
