set terminal pngcairo size 1000,620 font 'sans,10'
set output 'ingest-cdf.png'
set title 'walhook-bench ingest: latency (as in the report) CDF (2 CPUs, pooled over runs)'
set logscale x
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of deliveries'
set yrange [0:1.001]
set grid xtics ytics mxtics
set key bottom right
set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 2 lc rgb 'gray'
set label 'p99' at graph 0.01, first 0.975 tc rgb 'gray'
plot 'data/ingest-1-000-req-s-walhook.cdf' using 1:2 with lines lw 2 lc 1 title 'walhook, 1,000 req/s', 'data/ingest-1-000-req-s-no-group-commit.cdf' using 1:2 with lines lw 2 lc 2 title 'no-group-commit, 1,000 req/s', 'data/ingest-1-000-req-s-naive.cdf' using 1:2 with lines lw 2 lc 3 title 'naive, 1,000 req/s', 'data/ingest-5-000-req-s-walhook.cdf' using 1:2 with lines lw 2 lc 4 title 'walhook, 5,000 req/s', 'data/ingest-5-000-req-s-no-group-commit.cdf' using 1:2 with lines lw 2 lc 5 title 'no-group-commit, 5,000 req/s', 'data/ingest-5-000-req-s-naive.cdf' using 1:2 with lines lw 2 lc 6 title 'naive, 5,000 req/s', 'data/ingest-ladder-walhook.cdf' using 1:2 with lines lw 2 lc 7 title 'walhook, ladder', 'data/ingest-ladder-no-group-commit.cdf' using 1:2 with lines lw 2 lc 8 title 'no-group-commit, ladder', 'data/ingest-ladder-naive.cdf' using 1:2 with lines lw 2 lc 9 title 'naive, ladder'
