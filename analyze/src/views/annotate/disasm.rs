//! Machine code to instructions with iced-x86: AT&T syntax as perf annotate and objdump print
//! it (or Intel's), branch and call targets and RIP-relative operands named `<symbol+offset>`.

use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction, IntelFormatter};

/// One decoded instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub addr: u64,
    pub len: u32,
    pub text: String,
}

/// Which syntax to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Att,
    Intel,
}

/// The decoder's bitness for an ELF architecture, or why its code cannot be decoded.
pub fn bitness(arch: object::Architecture) -> Result<u32, String> {
    match arch {
        object::Architecture::X86_64 => Ok(64),
        object::Architecture::X86_64_X32 | object::Architecture::I386 => Ok(32),
        other => Err(format!(
            "cannot disassemble {other:?} code (iced-x86 decodes x86 and x86-64 only): \
             showing source lines without instructions"
        )),
    }
}

/// Decodes `code`, which sits at `start`, into instructions; `name_of` names the targets of
/// branches and calls (`symbol+0x10`); RIP-relative operands get their address as a comment. Bytes that do not decode
/// are listed as `(bad)`, one byte each, as objdump lists them.
pub fn disassemble(
    code: &[u8],
    start: u64,
    bitness: u32,
    syntax: Syntax,
    name_of: &dyn Fn(u64) -> Option<String>,
) -> Vec<Decoded> {
    let mut formatter: Box<dyn Formatter> = match syntax {
        Syntax::Att => Box::new(GasFormatter::new()),
        Syntax::Intel => Box::new(IntelFormatter::new()),
    };
    let options = formatter.options_mut();
    // objdump's layout: the mnemonic padded, operands after, hex in lower case with `0x`.
    options.set_first_operand_char_index(7);
    options.set_space_after_operand_separator(false);
    options.set_uppercase_hex(false);
    options.set_small_hex_numbers_in_decimal(false);
    options.set_hex_prefix("0x");
    options.set_hex_suffix("");
    options.set_show_branch_size(false);
    options.set_rip_relative_addresses(true);

    let mut decoder = Decoder::with_ip(bitness, code, start, DecoderOptions::NONE);
    let mut insn = Instruction::default();
    let mut out = Vec::new();
    while decoder.can_decode() {
        decoder.decode_out(&mut insn);
        let mut text = String::new();
        if insn.is_invalid() {
            text.push_str("(bad)");
        } else {
            if let Some(target) = branch_target(&insn) {
                // As objdump: `jne    11d8 <hot_loop+0x38>`.
                formatter.format_mnemonic(&insn, &mut text);
                text = format!("{text:<6} {target:x}");
                if let Some(name) = name_of(target) {
                    text.push_str(&format!(" <{name}>"));
                }
            } else {
                formatter.format(&insn, &mut text);
                if insn.is_ip_rel_memory_operand() {
                    text.push_str(&format!("        # {:x}", insn.ip_rel_memory_address()));
                }
            }
        }
        out.push(Decoded {
            addr: insn.ip(),
            len: insn.len() as u32,
            text,
        });
    }
    out
}

fn branch_target(insn: &Instruction) -> Option<u64> {
    (insn.is_call_near() || insn.is_jmp_short_or_near() || insn.is_jcc_short_or_near())
        .then(|| insn.near_branch_target())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn att_and_intel_with_named_targets() {
        // 11c6: call 1050; 11cb: mov $0x1,%ecx; 11d0: jne 11c6; 11d2: mov 0x10(%rip),%rax; ud
        let code = [
            0xe8, 0x85, 0xfe, 0xff, 0xff, 0xb9, 0x01, 0x00, 0x00, 0x00, 0x75, 0xf4, 0x48, 0x8b,
            0x05, 0x10, 0x00, 0x00, 0x00, 0x0f,
        ];
        let name = |a: u64| match a {
            0x1050 => Some("clock_gettime@plt".to_string()),
            0x11c6 => Some("hot_loop+0x26".to_string()),
            _ => None,
        };
        let att = disassemble(&code, 0x11c6, 64, Syntax::Att, &name);
        let text: Vec<&str> = att.iter().map(|d| d.text.as_str()).collect();
        assert_eq!(
            text,
            [
                "call   1050 <clock_gettime@plt>",
                "mov    $0x1,%ecx",
                "jne    11c6 <hot_loop+0x26>",
                "mov    0x10(%rip),%rax        # 11e9",
                "(bad)",
            ]
        );
        assert_eq!(
            att.iter().map(|d| (d.addr, d.len)).collect::<Vec<_>>(),
            [
                (0x11c6, 5),
                (0x11cb, 5),
                (0x11d0, 2),
                (0x11d2, 7),
                (0x11d9, 1)
            ]
        );
        let intel = disassemble(&code, 0x11c6, 64, Syntax::Intel, &name);
        assert_eq!(intel[1].text, "mov    ecx,0x1");
    }

    #[test]
    fn other_architectures_are_named() {
        let e = bitness(object::Architecture::Aarch64).unwrap_err();
        assert!(e.contains("Aarch64"), "{e}");
    }
}
