//! README.md's contents list is the README's sections: a newcomer reads the list first, so a
//! section added, renamed or moved without it would be a section they never find.

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The `##` and `###` headings outside code blocks, as contents lines.
fn contents(readme: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let (indent, title) = if let Some(t) = line.strip_prefix("### ") {
            ("  ", t)
        } else if let Some(t) = line.strip_prefix("## ") {
            ("", t)
        } else {
            continue;
        };
        if title == "Contents" {
            continue;
        }
        out.push(format!("{indent}* [{title}](#{})", anchor(title)));
    }
    out
}

#[test]
fn the_contents_list_is_the_readmes_sections() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let want = contents(&readme);
    let start = readme
        .find("## Contents\n")
        .expect("README.md has a '## Contents' section")
        + "## Contents\n".len();
    let listed: Vec<String> = readme[start..]
        .lines()
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    assert!(
        listed == want,
        "README.md's contents list differs from its sections; it should read:\n\n{}\n",
        want.join("\n")
    );
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor("`rocesw replay`"), "rocesw-replay");
    assert_eq!(
        anchor("A fabric in virtual time: `rocesw fabric`"),
        "a-fabric-in-virtual-time-rocesw-fabric"
    );
    assert_eq!(
        anchor("Attaching a QEMU VM (vhost-user)"),
        "attaching-a-qemu-vm-vhost-user"
    );
}
