use super::*;

fn limits(max: usize, per_client: usize) -> ConnLimits {
    ConnLimits {
        max,
        per_client,
        max_streams: default_streams(max),
        per_client_streams: default_streams(per_client),
        header_timeout: Duration::from_secs(5),
        min_body_rate: 1024,
        body_timeout: Duration::from_secs(60),
        send_timeout: Duration::from_secs(30),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn the_budget_sets_calls_and_the_server_aside_first() {
    let b = DescriptorBudget::new(20_000, 2, 8);
    assert_eq!(b.server, SERVER_RESERVE + 2 * PER_ROOT);
    assert_eq!(
        b.calls,
        8 * (MAX_DESCRIPTORS as u64 + PER_CALL_HOST + 2 * PER_ROOT)
    );
    assert_eq!(b.left(), 20_000 - b.server - b.calls);
    assert_eq!(b.default_connections(), DEFAULT_MAX_CONNECTIONS as usize);
    assert!(b.fits(4096));

    // What is left, below the ceiling.
    let b = DescriptorBudget::new(1024, 1, 1);
    assert_eq!(b.default_connections() as u64, b.left());
    assert!(b.fits(b.default_connections()));
    assert!(!b.fits(b.default_connections() + 1));

    // Too low for the reserve: a quarter of the limit, which does not fit.
    let b = DescriptorBudget::new(1024, 1, 8);
    assert_eq!(b.left(), 0);
    assert_eq!(b.default_connections(), 256);
    assert!(!b.fits(256));
    assert_eq!(default_per_client(4096), 1024);
    assert_eq!(default_per_client(3), 1);
}

/// Admits from `ip` where `victim` must make room: it is told to
/// close, the new one waits until its ticket drops.
fn make_room(conns: &Arc<Conns>, ip: IpAddr, victim: Ticket) -> Ticket {
    assert_eq!(conns.admit(ip).err(), Some(Refused::Closing));
    assert!(victim.closing().is_cancelled());
    drop(victim);
    conns.admit(ip).unwrap()
}

#[test]
fn a_full_client_gives_way_longest_waiting_first() {
    let conns = Conns::new(&limits(100, 3));
    let a = ip("127.0.0.1");
    let first = conns.admit(a).unwrap();
    let second = conns.admit(a).unwrap();
    let third = conns.admit(a).unwrap();
    // `first` waits for a head since it opened; `second` was answered
    // just now: `first` goes, though `second` opened after it.
    drop(second.request(true));
    let fourth = make_room(&conns, a, first);
    assert!(!second.closing().is_cancelled());
    // `third` has waited longest now, then `second`.
    let _fifth = make_room(&conns, a, third);
    let _sixth = make_room(&conns, a, second);
    assert!(!fourth.closing().is_cancelled());
    assert_eq!(conns.open(), 3);
    // Another address is not touched by one client's cap.
    let other = conns.admit(ip("127.0.0.2")).unwrap();
    assert!(!other.closing().is_cancelled());
    assert_eq!(conns.open(), 4);
}

#[test]
fn a_body_receiving_since_long_gives_way_and_an_answering_one_never() {
    let conns = Conns::new(&limits(100, 2));
    let a = ip("10.0.0.1");
    let one = conns.admit(a).unwrap();
    let two = conns.admit(a).unwrap();
    // `one` has been receiving its body since before `two` went idle.
    let _receiving = one.request(false);
    drop(two.request(true));
    let three = make_room(&conns, a, one);
    assert!(!two.closing().is_cancelled());
    // A body that arrives whole makes its connection answering.
    let r2 = two.request(false);
    r2.body_done();
    let _r3 = three.request(true);
    assert_eq!(conns.admit(a).err(), Some(Refused::ClientFull(2)));
    // Once an answer ends, the connection waits and may give way.
    drop(r2);
    make_room(&conns, a, two);
    assert!(!three.closing().is_cancelled());
}

#[test]
fn the_total_cap_takes_from_any_client_and_refuses_when_all_answer() {
    let conns = Conns::new(&limits(2, 2));
    let one = conns.admit(ip("10.0.0.1")).unwrap();
    let two = conns.admit(ip("10.0.0.2")).unwrap();
    let three = make_room(&conns, ip("10.0.0.3"), one);
    assert_eq!(conns.open(), 2);
    let _a = two.request(true);
    let _b = three.request(true);
    assert_eq!(conns.admit(ip("10.0.0.4")).err(), Some(Refused::Full(2)));
    assert_eq!(conns.open(), 2);
}

#[test]
fn the_total_cap_takes_from_the_address_holding_the_most() {
    let conns = Conns::new(&limits(4, 4));
    // A legitimate client's kept-alive connection, idle the longest.
    let legit = conns.admit(ip("10.0.0.1")).unwrap();
    let mut flood: Vec<_> = (0..3)
        .map(|_| conns.admit(ip("10.0.0.9")).unwrap())
        .collect();
    // Full: the flooder's own longest-waiting connection goes.
    let _next = make_room(&conns, ip("10.0.0.9"), flood.remove(0));
    assert!(!legit.closing().is_cancelled());
    assert!(!flood[0].closing().is_cancelled());
    // A newcomer too takes from the flooder, not from the legit client.
    let _other = make_room(&conns, ip("10.0.0.2"), flood.remove(0));
    assert!(!legit.closing().is_cancelled());
    assert_eq!(conns.open(), 4);
    // Ties (one connection each): the longest waiting goes.
    let conns = Conns::new(&limits(2, 2));
    let one = conns.admit(ip("10.0.0.1")).unwrap();
    let two = conns.admit(ip("10.0.0.2")).unwrap();
    let _three = make_room(&conns, ip("10.0.0.3"), one);
    assert!(!two.closing().is_cancelled());
    // An address whose connections are all answering is passed over.
    let conns = Conns::new(&limits(3, 3));
    let busy: Vec<_> = (0..2)
        .map(|_| conns.admit(ip("10.0.0.9")).unwrap())
        .collect();
    let _answering: Vec<_> = busy.iter().map(|t| t.request(true)).collect();
    let idle = conns.admit(ip("10.0.0.1")).unwrap();
    let _new = make_room(&conns, ip("10.0.0.2"), idle);
    assert!(busy.iter().all(|t| !t.closing().is_cancelled()));
}

#[test]
fn event_streams_are_capped_and_the_oldest_closes() {
    // 16 connections, 4 per client: 4 streams, 1 per client.
    let conns = Conns::new(&limits(16, 4));
    let a = ip("10.0.0.1");
    let stream = |ip| {
        let ticket = conns.admit(ip).unwrap();
        let request = ticket.request(true);
        request.streaming();
        (ticket, request)
    };
    let (old, _r) = stream(a);
    let (new, _r2) = stream(a);
    // One per client: the client's older stream closes, not the new one.
    assert!(old.closing().is_cancelled());
    assert!(!new.closing().is_cancelled());
    assert_eq!(conns.streams(), 1);
    // The total: 4 streams from 4 addresses, then a fifth address takes
    // the place of the oldest (each address holds one).
    let others: Vec<_> = ["10.0.0.2", "10.0.0.3", "10.0.0.4"]
        .iter()
        .map(|s| stream(ip(s)))
        .collect();
    assert_eq!(conns.streams(), 4);
    let _fifth = stream(ip("10.0.0.5"));
    assert!(new.closing().is_cancelled(), "the oldest stream");
    assert!(others.iter().all(|(t, _)| !t.closing().is_cancelled()));
    assert_eq!(conns.streams(), 4);
    // A stream that ends frees its place and its connection waits.
    drop(others);
    assert_eq!(conns.streams(), 1);
    // A streaming connection never gives way to a connection.
    let conns = Conns::new(&limits(2, 2));
    let s1 = conns.admit(a).unwrap();
    let r1 = s1.request(true);
    r1.streaming();
    let idle = conns.admit(a).unwrap();
    let _third = make_room(&conns, a, idle);
    assert!(!s1.closing().is_cancelled());
    drop(r1);
    assert_eq!(conns.streams(), 0);
}

#[test]
fn the_heaviest_client_gives_its_oldest_stream_beyond_the_total() {
    // 8 streams in all, 4 per client.
    let conns = Conns::new(&limits(32, 16));
    let stream = |ip| {
        let ticket = conns.admit(ip).unwrap();
        let request = ticket.request(true);
        request.streaming();
        (ticket, request)
    };
    let legit = stream(ip("10.0.0.1"));
    let heavy: Vec<_> = (0..4).map(|_| stream(ip("10.0.0.9"))).collect();
    let others: Vec<_> = (0..3).map(|_| stream(ip("10.0.0.2"))).collect();
    assert_eq!(conns.streams(), 8);
    let _new = stream(ip("10.0.0.3"));
    // Not the oldest of all (legit's), but the oldest of the heaviest.
    assert!(!legit.0.closing().is_cancelled());
    assert!(heavy[0].0.closing().is_cancelled());
    assert!(heavy[1..].iter().all(|(t, _)| !t.closing().is_cancelled()));
    assert!(others.iter().all(|(t, _)| !t.closing().is_cancelled()));
    assert_eq!(conns.streams(), 8);
}

#[test]
fn a_closing_connection_stays_counted_and_no_other_closes_for_it() {
    let conns = Conns::new(&limits(2, 1));
    let a = ip("10.0.0.1");
    let one = conns.admit(a).unwrap();
    assert_eq!(conns.admit(a).err(), Some(Refused::Closing));
    assert!(one.closing().is_cancelled());
    // Counted until its ticket drops; asking again closes nothing more.
    assert_eq!(conns.open(), 1);
    assert_eq!(conns.admit(a).err(), Some(Refused::Closing));
    // Its request ending does not make it wait (and give way) again.
    drop(one.request(true));
    drop(one);
    assert_eq!(conns.open(), 0);
    let two = conns.admit(a).unwrap();
    let answering = two.request(true);
    assert_eq!(conns.admit(a).err(), Some(Refused::ClientFull(1)));
    drop(answering);
    drop(two);
    assert_eq!(conns.open(), 0);
    assert!(conns.table().clients.is_empty());
    assert_eq!(conns.table().closing, 0);

    // The total cap: one closing for it, the next newcomer waits too,
    // and no other connection is closed on its account.
    let conns = Conns::new(&limits(2, 2));
    let one = conns.admit(ip("10.0.0.1")).unwrap();
    let two = conns.admit(ip("10.0.0.2")).unwrap();
    assert_eq!(conns.admit(ip("10.0.0.3")).err(), Some(Refused::Closing));
    assert_eq!(conns.admit(ip("10.0.0.4")).err(), Some(Refused::Closing));
    assert!(one.closing().is_cancelled());
    assert!(!two.closing().is_cancelled());
    assert_eq!(conns.open(), 2);
    drop(one);
    let _four = conns.admit(ip("10.0.0.4")).unwrap();
    assert_eq!(conns.open(), 2);
}

#[test]
fn ipv6_clients_count_by_their_64_prefix() {
    let conns = Conns::new(&limits(10, 1));
    let one = conns.admit(ip("2001:db8::1")).unwrap();
    // Same /64.
    let two = make_room(&conns, ip("2001:db8::ffff:2"), one);
    let _three = conns.admit(ip("2001:db8:0:1::1")).unwrap();
    assert!(!two.closing().is_cancelled(), "another /64");
    // An IPv4-mapped address is the IPv4 client.
    let four = conns.admit(ip("192.0.2.1")).unwrap();
    let _five = make_room(&conns, ip("::ffff:192.0.2.1"), four);
}
