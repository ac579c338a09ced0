//! Where a function lies in an ELF file, as a uprobe wants it: the symbol looked up in
//! `.symtab`, then `.dynsym`, then in the binary's separate debug file (by build id, then by
//! `.gnu_debuglink`), and its address turned into a file offset through its PT_LOAD segment.

use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{ElfFile64, ProgramHeader, Sym, SymbolTable};
use object::{Endianness, Object};

/// A function found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Its address (as `nm` shows it).
    pub address: u64,
    /// Bytes (0: unknown).
    pub size: u64,
    /// Where the table that had it came from (`.symtab`, `.dynsym`, a debug file's path).
    pub table: String,
}

/// What a function lookup failed on, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// No function of that name; the closest names, and whether the binary is stripped (no
    /// `.symtab` and no debug file found: the debug file's expected path).
    NotFound {
        closest: Vec<String>,
        stripped: Option<String>,
    },
    /// The binary only calls it (an undefined, imported symbol).
    Imported,
    /// A GNU indirect function: the symbol is its resolver; the implementations' names
    /// (none when they are only in a debug file that is missing).
    Ifunc { implementations: Vec<String> },
}

/// A binary's symbols.
pub struct Binary {
    pub path: PathBuf,
    data: Vec<u8>,
}

impl Binary {
    pub fn open(path: &Path) -> anyhow::Result<Binary> {
        let data = std::fs::read(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        ElfFile64::<Endianness>::parse(&*data)
            .map_err(|e| anyhow::anyhow!("{}: not a 64-bit ELF file ({e})", path.display()))?;
        Ok(Binary {
            path: path.to_path_buf(),
            data,
        })
    }

    fn elf(&self) -> ElfFile64<'_, Endianness> {
        ElfFile64::parse(&*self.data).expect("checked when opened")
    }

    pub fn build_id(&self) -> Option<Vec<u8>> {
        self.elf().build_id().ok().flatten().map(<[u8]>::to_vec)
    }

    /// The file offset of `address` (through the PT_LOAD segment whose file bytes hold it).
    pub fn file_offset(&self, address: u64) -> Option<u64> {
        let elf = self.elf();
        let e = elf.endian();
        elf.elf_program_headers()
            .iter()
            .filter(|ph| ph.p_type(e) == elf::PT_LOAD)
            .find_map(|ph| {
                let (vaddr, filesz) = (ph.p_vaddr(e), ph.p_filesz(e));
                (vaddr..vaddr + filesz)
                    .contains(&address)
                    .then(|| address - vaddr + ph.p_offset(e))
            })
    }

    /// The function `name`, looked for in this binary's tables, then in its debug file
    /// under `debug_root` (`/usr/lib/debug`).
    pub fn function(&self, name: &str, debug_root: &Path) -> Result<Function, Missing> {
        let elf = self.elf();
        let mut names = Vec::new();
        let mut imported = false;
        let mut found = None;
        for (table, label, versions) in [
            (elf.elf_symbol_table(), ".symtab", false),
            (elf.elf_dynamic_symbol_table(), ".dynsym", true),
        ] {
            match search(&elf, table, versions, name, &mut names) {
                Search::Found(address, size, ifunc) => {
                    found = Some((address, size, ifunc, label.to_string()));
                    break;
                }
                Search::Undefined => imported = true,
                Search::None => {}
            }
        }
        // The debug file: for the function, or for an indirect one's implementations.
        let debug = match found {
            Some((.., false, _)) => None,
            _ => self.debug_file(debug_root),
        };
        if let Some((path, data)) = &debug {
            if let Ok(d) = ElfFile64::<Endianness>::parse(&**data) {
                let r = search(&d, d.elf_symbol_table(), false, name, &mut names);
                if let (None, Search::Found(address, size, ifunc)) = (&found, r) {
                    found = Some((address, size, ifunc, path.display().to_string()));
                }
            }
        }
        match found {
            Some((.., true, _)) => Err(Missing::Ifunc {
                implementations: implementations(name, &names),
            }),
            Some((address, size, false, table)) => Ok(Function {
                address,
                size,
                table,
            }),
            None if imported => Err(Missing::Imported),
            None => Err(Missing::NotFound {
                closest: closest(name, &names),
                stripped: (elf.elf_symbol_table().is_empty() && debug.is_none()).then(|| {
                    self.debug_paths(debug_root)
                        .first()
                        .map_or_else(|| "no build id".into(), |p| p.display().to_string())
                }),
            }),
        }
    }

    /// Where its separate debug file may be: by build id, then by `.gnu_debuglink`.
    fn debug_paths(&self, root: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(id) = self.build_id().filter(|id| id.len() > 1) {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            out.push(root.join(format!(".build-id/{}/{}.debug", &hex[..2], &hex[2..])));
        }
        if let Ok(Some((link, _))) = self.elf().gnu_debuglink() {
            let link = String::from_utf8_lossy(link).into_owned();
            if let Some(dir) = self.path.parent() {
                out.push(root.join(dir.strip_prefix("/").unwrap_or(dir)).join(&link));
                out.push(dir.join(".debug").join(&link));
            }
        }
        out
    }

    fn debug_file(&self, root: &Path) -> Option<(PathBuf, Vec<u8>)> {
        self.debug_paths(root)
            .into_iter()
            .find_map(|p| std::fs::read(&p).ok().map(|d| (p, d)))
    }
}

enum Search {
    Found(u64, u64, bool),
    Undefined,
    None,
}

/// Looks `name` up in one table, gathering the function names seen (for "closest").
/// `versions`: prefer the default version of a versioned symbol (`.dynsym`).
fn search<'d>(
    elf: &ElfFile64<'d, Endianness>,
    table: &SymbolTable<'d, elf::FileHeader64<Endianness>>,
    versions: bool,
    name: &str,
    names: &mut Vec<String>,
) -> Search {
    let e = elf.endian();
    let versym = if versions {
        elf.elf_section_table()
            .versions(e, elf.data())
            .ok()
            .flatten()
    } else {
        None
    };
    let strings = table.strings();
    let mut found: Option<(u64, u64, bool, bool)> = None;
    let mut undefined = false;
    for (i, sym) in table.enumerate() {
        let ty = sym.st_type();
        if ty != elf::STT_FUNC && ty != elf::STT_GNU_IFUNC {
            continue;
        }
        let Ok(raw) = sym.name(e, strings) else {
            continue;
        };
        let full = String::from_utf8_lossy(raw);
        // `.symtab` of a versioned library may spell `memcpy@GLIBC_2.2.5`.
        let base = full.split('@').next().unwrap_or(&full);
        if base != name {
            if !sym.is_undefined(e) && names.last().map(String::as_str) != Some(base) {
                names.push(base.to_string());
            }
            continue;
        }
        if sym.is_undefined(e) {
            undefined = true;
            continue;
        }
        let hidden = versym
            .as_ref()
            .is_some_and(|v| v.version_index(e, i).is_hidden())
            || full.contains('@') && !full.contains("@@");
        let better = match found {
            None => true,
            Some((.., was_hidden)) => was_hidden && !hidden,
        };
        if better {
            let ifunc = ty == elf::STT_GNU_IFUNC;
            found = Some((sym.st_value(e), sym.st_size(e), ifunc, hidden));
        }
    }
    match found {
        Some((a, s, ifunc, _)) => Search::Found(a, s, ifunc),
        None if undefined => Search::Undefined,
        None => Search::None,
    }
}

/// An indirect function's implementations: the functions named after it (`__strlen_avx2`).
fn implementations(name: &str, names: &[String]) -> Vec<String> {
    let mut found: Vec<String> = names
        .iter()
        .filter(|n| n.contains(name) && n.as_str() != name)
        .cloned()
        .collect();
    found.sort();
    found.dedup();
    found.truncate(5);
    found
}

fn closest(name: &str, names: &[String]) -> Vec<String> {
    let mut names: Vec<&str> = names.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    super::closest::closest(name, names.into_iter().map(|n| (n, n)), 5)
        .into_iter()
        .map(String::from)
        .collect()
}

/// Tests only: whether `data` has a `.symtab`.
#[cfg(test)]
pub fn has_symtab(path: &Path) -> bool {
    Binary::open(path).is_ok_and(|b| !b.elf().elf_symbol_table().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracing::testing::{skip_or_fail, temp_dir};

    const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn libc_functions() {
        let Ok(libc) = Binary::open(Path::new(LIBC)) else {
            return skip_or_fail("no libc.so.6 at /usr/lib/x86_64-linux-gnu");
        };
        let none = Path::new("/nonexistent");
        // Exported: in .dynsym; its offset is where its bytes lie in the file.
        let f = libc.function("getaddrinfo", none).unwrap();
        assert!(f.size > 0 && f.table == ".dynsym", "{f:?}");
        let off = libc.file_offset(f.address).unwrap();
        assert!(off > 0 && off < std::fs::metadata(LIBC).unwrap().len());
        // Misspelled: the closest names.
        match libc.function("getaddrinfp", none) {
            Err(Missing::NotFound { closest, stripped }) => {
                assert_eq!(
                    closest.first().map(String::as_str),
                    Some("getaddrinfo"),
                    "{closest:?}"
                );
                assert!(closest.len() <= 5);
                // libc has no .symtab: without its debug file it counts as stripped.
                assert!(stripped.unwrap().contains("/nonexistent/.build-id/"));
            }
            other => panic!("{other:?}"),
        }
        // strlen is an indirect function: refused; its implementations are named in the
        // debug file only.
        assert_eq!(
            libc.function("strlen", none),
            Err(Missing::Ifunc {
                implementations: vec![]
            })
        );
        // Versioned: the default version (pthread_cond_wait@@GLIBC_2.3.2).
        let cond = libc.function("pthread_cond_wait", none).unwrap();
        assert!(cond.address > 0);
    }

    #[test]
    fn libc_debug_file() {
        let Ok(libc) = Binary::open(Path::new(LIBC)) else {
            return skip_or_fail("no libc.so.6");
        };
        let debug = Path::new("/usr/lib/debug");
        if libc.debug_file(debug).is_none() {
            return skip_or_fail("no debug file for libc (libc6-dbg)");
        }
        match libc.function("strlen", debug) {
            Err(Missing::Ifunc { implementations }) => assert!(
                !implementations.is_empty() && implementations.iter().all(|n| n.contains("strlen")),
                "{implementations:?}"
            ),
            other => panic!("{other:?}"),
        }
        // A static function, only in the debug file's .symtab.
        let f = libc.function("_IO_new_file_overflow", debug).unwrap();
        assert!(f.table.starts_with("/usr/lib/debug/.build-id/"), "{f:?}");
        assert!(libc.file_offset(f.address).is_some());
    }

    #[test]
    fn programs_imports_and_stripped_binaries() {
        let dir = temp_dir("elf");
        let src = dir.join("t.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\n__attribute__((noinline)) static int helper(int x) { return x * 3; }\n\
             int visible(int x) { return helper(x) + 1; }\nint main(int c, char **v) { printf(\"%d\\n\", visible(c)); return 0; }\n",
        )
        .unwrap();
        let bin = dir.join("t");
        let built = std::process::Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&bin)
            .arg(&src)
            .status();
        if !built.is_ok_and(|s| s.success()) {
            return skip_or_fail("no C compiler (cc)");
        }
        let none = Path::new("/nonexistent");
        let b = Binary::open(&bin).unwrap();
        let helper = b.function("helper", none).unwrap();
        assert_eq!(helper.table, ".symtab");
        // The offset, through the segments, is where .text's header puts the address too.
        use object::{Object as _, ObjectSection};
        let data = std::fs::read(&bin).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let text = obj.section_by_name(".text").unwrap();
        let by_section = helper.address - text.address() + text.file_range().unwrap().0;
        assert_eq!(b.file_offset(helper.address), Some(by_section));
        assert_eq!(b.function("printf", none), Err(Missing::Imported));
        match b.function("helpr", none) {
            Err(Missing::NotFound {
                closest,
                stripped: None,
            }) => assert_eq!(closest[0], "helper"),
            other => panic!("{other:?}"),
        }
        // Stripped: helper is gone, and there is no debug file.
        let stripped = dir.join("t.stripped");
        let ok = std::process::Command::new("strip")
            .arg("-o")
            .arg(&stripped)
            .arg(&bin)
            .status();
        if !ok.is_ok_and(|s| s.success()) {
            return skip_or_fail("no strip");
        }
        assert!(has_symtab(&bin) && !has_symtab(&stripped));
        let s = Binary::open(&stripped).unwrap();
        match s.function("helper", none) {
            Err(Missing::NotFound {
                stripped: Some(debug),
                ..
            }) => {
                assert!(debug.starts_with("/nonexistent/.build-id/"), "{debug}")
            }
            other => panic!("{other:?}"),
        }
        // Its debug file, where the build id says, brings it back.
        let root = dir.join("debug");
        let id: String = s
            .build_id()
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let at = root.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::copy(&bin, &at).unwrap();
        let again = s.function("helper", &root).unwrap();
        assert_eq!(again.address, helper.address);
        assert_eq!(s.file_offset(again.address), b.file_offset(helper.address));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
