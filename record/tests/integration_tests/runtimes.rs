//! JIT code of runtimes named as perf names it from the same maps: HotSpot (JDK 17) with no
//! flag on its command line (record has the JVM write its perf map: at exit, or by jcmd at
//! the end), Node with `--perf-basic-prof` (perf map) and `--perf-prof` (jitdump).
//!
//! The oracle is `perf script` on the same file: it reads /tmp/perf-PID.map itself, and the
//! jitdump after `perf inject --jit`. Sample by sample, the leaf frame in JIT code must carry
//! the same name in analyze's script as in perf's, and the hot method must be the leaf of at
//! least 90% of the samples in JIT code, in DWARF mode (the default) and in fp mode.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::common::*;

const HOT_JAVA: &str = r#"
public class Hot {
    static long hotLoop(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) { s = s * 31 + (i ^ (s >>> 7)); }
        return s;
    }
    public static void main(String[] a) {
        long end = System.nanoTime() + (long) (Double.parseDouble(a[0]) * 1e9);
        long acc = 0;
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        while (System.nanoTime() < end) acc += hotLoop(1_000_000);
        System.out.println(acc);
    }
}
"#;

const HOT_JS: &str = r#"
function hotLoop(n) { let s = 0; for (let i = 0; i < n; i++) { s = (s * 31 + (i ^ (s >>> 7))) | 0; } return s; }
const end = Date.now() + parseFloat(process.argv[2]) * 1000;
let a = 0;
while (Date.now() < end) a += hotLoop(1000000);
console.log(a);
"#;

/// Whether a frame's dso is JIT code: the perf map of the process (both tools name
/// anonymous code by it, with or without the file), the jitdump file (analyze names the
/// code it describes by it), or a perf-inject'ed jitdump function.
fn is_jit_dso(dso: &str) -> bool {
    let file = dso.rsplit('/').next().unwrap_or("");
    (dso.starts_with("/tmp/perf-") && dso.ends_with(".map"))
        || (file.starts_with("jit-") && file.ends_with(".dump"))
        || file.starts_with("jitted-")
}

/// Leaves of the cpu-clock samples of `comm`, as (symbol, dso), in the file's order. perf's
/// inline frames (dso `inlined`) are passed over: where its addr2line finds an inlined entry
/// in the ELF `perf inject --jit` wrote, perf prints an unnamed one (`??:0 (inlined)`) before
/// the function (34 of 1,994 leaves in one CI run of four locally clean ones); analyze gives
/// JIT code no inline frames.
fn leaves(script: &str, comm: &str) -> Vec<(String, String)> {
    parse_script(script)
        .into_iter()
        .filter(|s| s.event == "cpu-clock" && s.comm == comm)
        .map(|s| {
            let mut frames = s.frames.into_iter().filter(|(_, dso)| dso != "inlined");
            frames.next().unwrap_or_default()
        })
        .collect()
}

/// Checks analyze's and perf's names of the JIT leaves of `ours` (`perf_file`: what perf
/// reads, the same file or its injected copy) and the share of `method` among them.
/// Returns (JIT samples, share named `method`).
fn check_jit_names(
    what: &str,
    ours: &Path,
    perf_file: &Path,
    comm: &str,
    method: &str,
) -> (usize, f64) {
    let perf = Command::new("perf")
        .args([
            "script",
            "-F",
            "comm,tid,time,period,event,ip,sym,dso",
            "-i",
        ])
        .arg(perf_file)
        .output()
        .unwrap();
    assert!(
        perf.status.success(),
        "{what}: perf script: {}",
        stderr_of(&perf)
    );
    let perf = leaves(&String::from_utf8_lossy(&perf.stdout), comm);
    let out = analyze(&["script"], ours);
    assert!(
        out.status.success(),
        "{what}: analyze script: {}",
        stderr_of(&out)
    );
    let ours = leaves(&String::from_utf8_lossy(&out.stdout), comm);
    assert_eq!(ours.len(), perf.len(), "{what}: sample counts");
    let mut jit = 0;
    let mut named = 0;
    let mut differ = Vec::new();
    for (o, p) in ours.iter().zip(&perf) {
        // Code in anonymous memory, as analyze places it. (With --perf-prof, V8's jitdump
        // also describes the builtins embedded in node's own text: perf inject names those
        // `Builtin:Add` where node's symbols say `Builtins_AddHandler`; they are no JIT code.)
        if !is_jit_dso(&o.1) {
            continue;
        }
        jit += 1;
        named += o.0.contains(method) as usize;
        if o.0 != p.0 {
            differ.push((o.clone(), p.clone()));
        }
    }
    assert!(jit >= 100, "{what}: only {jit} samples in JIT code");
    let share = named as f64 / jit as f64;
    eprintln!("{what}: {jit} samples in JIT code, {:.1}% named {method}, names equal to perf's on {} of them", share * 100.0, jit - differ.len());
    assert!(
        differ.is_empty(),
        "{what}: {} of {jit} JIT leaves named unlike perf (ours, perf's): {:?}",
        differ.len(),
        &differ[..differ.len().min(5)]
    );
    assert!(
        share >= 0.9,
        "{what}: {method} is the leaf of {:.1}% of JIT samples",
        share * 100.0
    );
    (jit, share)
}

/// Starts `cmd` and waits for its "ready PID" line.
fn start_ready(cmd: &mut Command) -> (Child, u32) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ready line: {line:?}"));
    (child, pid)
}

fn javac(dir: &Path) {
    std::fs::write(dir.join("Hot.java"), HOT_JAVA).unwrap();
    let st = Command::new("javac")
        .arg(dir.join("Hot.java"))
        .status()
        .unwrap();
    assert!(st.success(), "javac failed");
}

/// The `DumpPerfMapAtExit` byte of the running JVM `pid` (jcmd's VM.flags hides diagnostic
/// flags): libjvm.so's symbol (nm) at its load base (lowest segment at 0), read from
/// /proc/PID/mem.
fn dump_perf_map_at_exit(pid: u32) -> u8 {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let (base, lib) = maps
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 6 && f[2] == "00000000" && f[5].ends_with("/libjvm.so")).then(|| {
                let start = f[0].split_once('-').unwrap().0;
                (u64::from_str_radix(start, 16).unwrap(), f[5].to_string())
            })
        })
        .expect("libjvm.so mapped");
    let nm = Command::new("nm").arg(&lib).output().unwrap();
    let sym = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == "DumpPerfMapAtExit")
                .then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .expect("DumpPerfMapAtExit in libjvm.so's symbols");
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut b = [0u8];
    mem.read_exact_at(&mut b, base + sym).unwrap();
    b[0]
}

#[test]
fn jvm_jit_code_is_named_without_flags_at_exit_and_by_jcmd() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("jvm");
    javac(&dir.0);
    let cp = dir.0.to_str().unwrap();
    for mode in ["dwarf", "fp"] {
        // The workload's JVM exits before the recording ends: it writes its map itself.
        let data = dir.path(&format!("workload-{mode}.data"));
        let out = record(
            &[
                "-q",
                "-o",
                data.to_str().unwrap(),
                "--call-graph",
                mode,
                "--no-off-cpu",
                "--no-io",
            ],
            &["java", "-cp", cp, "Hot", "3"],
        );
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("Picked up JAVA_TOOL_OPTIONS"),
            "{}",
            stderr_of(&out)
        );
        check_jit_names(
            &format!("record {mode} -- java"),
            &data,
            &data,
            "java",
            "Hot.hotLoop",
        );
        // The archive keeps the map: analyzed after the map is gone, the names stay.
        let archive = dir.path(&format!("workload-{mode}.tar.zst"));
        let out = analyze(&["archive", "-o", archive.to_str().unwrap()], &data);
        assert!(out.status.success(), "{}", stderr_of(&out));
        remove_maps_of("java", "Hot.hotLoop");
        let hot: u64 = analyze_folded(&archive, &[])
            .iter()
            .filter(|(k, _)| k.ends_with(";long Hot.hotLoop(long)"))
            .map(|(_, v)| v)
            .sum();
        assert!(
            hot >= 200,
            "{mode}: {hot} samples under Hot.hotLoop from the archive"
        );

        // A JVM running before the recording: jcmd at the end, while it still runs; killed
        // afterwards (no exit dump), so the map analyzed is jcmd's.
        let (mut jvm, pid) = start_ready(Command::new("java").args(["-cp", cp, "Hot", "30"]));
        let map = format!("/tmp/perf-{pid}.map");
        let _ = std::fs::remove_file(&map);
        std::thread::sleep(std::time::Duration::from_secs(1));
        let data = dir.path(&format!("attached-{mode}.data"));
        let p = pid.to_string();
        let out = Command::new(env!("CARGO_BIN_EXE_record"))
            .args([
                "-q",
                "-o",
                data.to_str().unwrap(),
                "--call-graph",
                mode,
                "--no-off-cpu",
                "--no-io",
            ])
            .args(["-p", &p, "--duration", "3"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        assert!(
            Path::new(&map).exists(),
            "record -p {pid}: no {map} while the JVM runs"
        );
        // The flag record turned on while it recorded is off again: a JVM that lives on
        // does not write a map at its exit because it was once recorded.
        assert_eq!(dump_perf_map_at_exit(pid), 0, "after record -p {pid}");
        jvm.kill().unwrap();
        jvm.wait().unwrap();
        check_jit_names(
            &format!("record {mode} -p (jcmd)"),
            &data,
            &data,
            "java",
            "Hot.hotLoop",
        );
        let _ = std::fs::remove_file(&map);

        // A JVM attached to that exits before the recording ends: the flag record set in it
        // has it write its map on the way out.
        // Then a shell attached to that starts the JVM a second later: record sets the flag
        // once the new JVM has settled.
        let shell = format!("echo ready $$; sleep 1; java -cp {cp} Hot 3");
        let attached: [(&str, Vec<&str>); 2] = [
            ("exit", vec!["java", "-cp", cp, "Hot", "3"]),
            ("started later", vec!["bash", "-c", &shell]),
        ];
        for (case, cmd) in attached {
            let (mut child, pid) = start_ready(Command::new(cmd[0]).args(&cmd[1..]));
            let data = dir.path(&format!("attached-{}-{mode}.data", case.replace(' ', "-")));
            let p = pid.to_string();
            let out = Command::new(env!("CARGO_BIN_EXE_record"))
                .args([
                    "-q",
                    "-o",
                    data.to_str().unwrap(),
                    "--call-graph",
                    mode,
                    "--no-off-cpu",
                    "--no-io",
                ])
                .args(["-p", &p])
                .output()
                .unwrap();
            child.wait().unwrap();
            assert!(out.status.success(), "{}", stderr_of(&out));
            check_jit_names(
                &format!("record {mode} -p ({case})"),
                &data,
                &data,
                "java",
                "Hot.hotLoop",
            );
            remove_maps_of("java", "Hot.hotLoop");
        }
    }
    // --jvm-perfmap=off: nothing asked, no map, no option given to the JVM.
    let data = dir.path("off.data");
    let out = record(
        &[
            "-q",
            "-o",
            data.to_str().unwrap(),
            "--jvm-perfmap=off",
            "--no-off-cpu",
            "--no-io",
        ],
        &["java", "-cp", cp, "Hot", "0.5"],
    );
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        !stderr_of(&out).contains("JAVA_TOOL_OPTIONS"),
        "{}",
        stderr_of(&out)
    );
    remove_maps_of("java", "Hot.hotLoop");
}

/// Removes the perf maps naming `needle` (the runtime writes them; the profiler reads them
/// after it exits, so nobody else does).
fn remove_maps_of(_comm: &str, needle: &str) {
    for e in std::fs::read_dir("/tmp").unwrap().flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("perf-")
            && name.ends_with(".map")
            && std::fs::read_to_string(&p).is_ok_and(|t| t.contains(needle))
        {
            let _ = std::fs::remove_file(&p);
        }
    }
}

#[test]
fn node_perf_maps_and_jitdump_name_js_functions_as_perf_does() {
    if !can_record() {
        return;
    }
    let _x = exclusive();
    let dir = TempDir::new("node");
    let script = dir.path("hot.js");
    std::fs::write(&script, HOT_JS).unwrap();
    let script = script.to_str().unwrap();
    for mode in ["dwarf", "fp"] {
        // In the test's directory: with either flag node also writes an isolate-*-v8.log
        // into its working directory.
        let data = dir.path(&format!("basic-{mode}.data"));
        let out = Command::new(env!("CARGO_BIN_EXE_record"))
            .current_dir(&dir.0)
            .args(["-q", "-o", data.to_str().unwrap(), "--call-graph", mode])
            .args([
                "--no-off-cpu",
                "--no-io",
                "--",
                "node",
                "--perf-basic-prof",
                script,
                "2",
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        check_jit_names(
            &format!("node --perf-basic-prof, {mode}"),
            &data,
            &data,
            "node",
            "hotLoop",
        );
        // V8 keeps frame pointers in its JIT code and builtins (which have no CFI): in DWARF
        // mode too the kernel's unwinder follows them into node's own CFI, up to main.
        let folded = analyze_folded(&data, &[]);
        let hot = |k: &str| k.rsplit(';').next().is_some_and(|l| l.contains("hotLoop"));
        let total: u64 = folded.iter().filter(|(k, _)| hot(k)).map(|(_, v)| v).sum();
        let rooted: u64 = folded
            .iter()
            .filter(|(k, _)| hot(k) && k.contains(";node::Start;"))
            .map(|(_, v)| v)
            .sum();
        eprintln!("node {mode}: {rooted} of {total} hotLoop samples reach node::Start");
        assert!(
            total > 0 && rooted as f64 >= 0.9 * total as f64,
            "{mode}: {rooted} of {total} hotLoop stacks reach node::Start"
        );

        // --perf-prof: a jitdump in the working directory, mapped by node; perf reads it after
        // perf inject --jit, analyze directly.
        let data = dir.path(&format!("prof-{mode}.data"));
        let out = Command::new(env!("CARGO_BIN_EXE_record"))
            .current_dir(&dir.0)
            .args([
                "-q",
                "-o",
                data.to_str().unwrap(),
                "--call-graph",
                mode,
                "--no-off-cpu",
                "--no-io",
            ])
            .args(["--", "node", "--perf-prof", script, "2"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        let injected = dir.path(&format!("prof-{mode}.injected.data"));
        let inject = Command::new("perf")
            .current_dir(&dir.0)
            .args(["inject", "--jit", "-i"])
            .arg(&data)
            .arg("-o")
            .arg(&injected)
            .output()
            .unwrap();
        assert!(
            inject.status.success(),
            "perf inject: {}",
            stderr_of(&inject)
        );
        check_jit_names(
            &format!("node --perf-prof, {mode}"),
            &data,
            &injected,
            "node",
            "hotLoop",
        );
        // A perf map another process left at node's pid (pids wrap: an earlier process's)
        // does not take the place of the jitdump node wrote.
        let dump = std::fs::read_dir(&dir.0)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|n| n.starts_with("jit-") && n.ends_with(".dump"))
            .expect("node's jitdump");
        let stale = format!(
            "/tmp/perf-{}.map",
            &dump["jit-".len()..dump.len() - ".dump".len()]
        );
        if !Path::new(&stale).exists() {
            std::fs::write(&stale, "1000 10 an_earlier_process\n").unwrap();
            check_jit_names(
                &format!("node --perf-prof beside a stale perf map, {mode}"),
                &data,
                &injected,
                "node",
                "hotLoop",
            );
            std::fs::remove_file(&stale).unwrap();
        }
    }
    remove_maps_of("node", "hotLoop");
}
