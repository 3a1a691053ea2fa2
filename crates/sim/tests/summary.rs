//! `tclab sim`'s printed table with many classes: an ISP's thousand subscriber classes would bury the
//! flows and pings, so it lists the 40 that dropped most (then sent most) and says where the rest are.
//! Expected by construction: one class is overfed and is the only one dropping.

use tclab_sim::run::run;
use tclab_sim::scenario::load;

#[test]
fn a_large_class_table_lists_the_classes_that_dropped_first() {
    // a → r → b at 10 Mbit/s; r's eth1: HTB with 50 leaves of 100 kbit under 1:1. UDP at 1 Mbit/s
    // into the default leaf 1:32 (pfifo limit 5; leaves 1:10 to 1:41) drops ~90 % of it; every other leaf is idle.
    let mut tc = String::from(
        "qdisc add dev eth1 root handle 1: htb default 32\n\
         class add dev eth1 parent 1: classid 1:1 htb rate 5mbit\n",
    );
    for i in 0x10..0x10 + 50 {
        tc.push_str(&format!(
            "class add dev eth1 parent 1:1 classid 1:{i:x} htb rate 100kbit\n"
        ));
    }
    tc.push_str("qdisc add dev eth1 parent 1:32 pfifo limit 5\n");
    let text = format!(
        "duration = \"2s\"\n\
         [[node]]\nname = \"a\"\n[[node]]\nname = \"r\"\nkind = \"router\"\n[[node]]\nname = \"b\"\n\
         [[link]]\na = \"a:eth0\"\nb = \"r:eth0\"\nrate = \"10mbit\"\n\
         [[link]]\na = \"r:eth1\"\nb = \"b:eth0\"\nrate = \"10mbit\"\n\
         [[policy]]\nnode = \"r\"\ntc = \"\"\"\n{tc}\"\"\"\n\
         [[traffic]]\nkind = \"udp\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1mbit\"\nlength = 1000\n"
    );
    let mut sc =
        load("many.toml", &text, std::path::Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    let out = run(&mut sc, &mut |_| {}).expect("the run completes");
    let table = tclab_sim::report::summary_text(&sc, &out);
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.starts_with("class "))
        .skip(1)
        .take_while(|l| l.starts_with("r:"))
        .collect();
    assert_eq!(rows.len(), 40, "{table}");
    assert!(
        rows[0].starts_with("r:eth1 1:32 "),
        "the dropping leaf first:\n{table}"
    );
    assert!(
        table.contains("(40 of 51 classes: those with the most drops, then bytes sent;"),
        "{table}"
    );
    // The files keep every class.
    let json = tclab_sim::report::summary_json(&sc, &out);
    let all = json["classes"].as_array().map_or(0, Vec::len);
    assert_eq!(all, 51, "{json}");
}
