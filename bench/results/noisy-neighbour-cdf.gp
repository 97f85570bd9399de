set terminal pngcairo size 1000,620 font 'sans,10'
set output 'noisy-neighbour-cdf.png'
set title 'walhook-bench noisy-neighbour: commit-to-receipt latency CDF (2 CPUs, pooled over runs)'
set logscale x
set xlabel 'latency (ms, log scale)'
set ylabel 'fraction of deliveries'
set yrange [0:1.001]
set grid xtics ytics mxtics
set key bottom right
set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 2 lc rgb 'gray'
set label 'p99' at graph 0.01, first 0.975 tc rgb 'gray'
plot 'data/noisy-neighbour-with-the-slow-endpoint-walhook.cdf' using 1:2 with lines lw 2 lc 1 title 'walhook, with the slow endpoint', 'data/noisy-neighbour-with-the-slow-endpoint-polling.cdf' using 1:2 with lines lw 2 lc 2 title 'polling, with the slow endpoint', 'data/noisy-neighbour-with-the-slow-endpoint-notify.cdf' using 1:2 with lines lw 2 lc 3 title 'notify, with the slow endpoint', 'data/noisy-neighbour-without-all-answer-at-once-walhook.cdf' using 1:2 with lines lw 2 lc 4 title 'walhook, without (all answer at once)', 'data/noisy-neighbour-without-all-answer-at-once-polling.cdf' using 1:2 with lines lw 2 lc 5 title 'polling, without (all answer at once)', 'data/noisy-neighbour-without-all-answer-at-once-notify.cdf' using 1:2 with lines lw 2 lc 6 title 'notify, without (all answer at once)'
