set terminal pngcairo size 1200,520 font 'sans,10'
set output 'shards-cpu.png'
datafile = 'data/shards-cpu.dat'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key top left
set yrange [0:*]
set xlabel 'walhook processes (1 per shard)'
set multiplot layout 1,2 title 'walhook-bench shards: CPU per event with 1 walhook per shard (2 CPUs, medians of runs)'
set ylabel 'walsender CPU per event of the whole stream (µs)'
set title 'backlog of 50,000, 10 rows per transaction'
plot datafile using 4:xtic(1) title 'each walsender' lc 1, '' using 5 title 'all walsenders' lc 2
set title 'walhook, all processes'
set ylabel 'walhook CPU per delivery (µs)'
plot datafile using 7:xtic(1) title 'backlog' lc 4
unset multiplot
