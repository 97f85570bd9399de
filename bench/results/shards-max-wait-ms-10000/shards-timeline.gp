set terminal pngcairo size 1000,820 font 'sans,10'
set output 'shards-timeline.png'
set multiplot layout 2,1 title 'walhook-bench shards (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/shards-backlog-50-000-1-shard-unsharded-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, backlog 50,000, 1 shard (unsharded)', 'data/shards-backlog-50-000-2-shards-walhook.timeline' using 1:2 with lines lw 2 lc 2 title 'walhook, backlog 50,000, 2 shards', 'data/shards-backlog-50-000-4-shards-walhook.timeline' using 1:2 with lines lw 2 lc 3 title 'walhook, backlog 50,000, 4 shards'
set ylabel 'slot lag (MiB)'
plot 'data/shards-backlog-50-000-1-shard-unsharded-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, backlog 50,000, 1 shard (unsharded) (unconfirmed)', 'data/shards-backlog-50-000-1-shard-unsharded-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, backlog 50,000, 1 shard (unsharded) (not yet sent)', 'data/shards-backlog-50-000-2-shards-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 2 title 'walhook, backlog 50,000, 2 shards (unconfirmed)', 'data/shards-backlog-50-000-2-shards-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 2 title 'walhook, backlog 50,000, 2 shards (not yet sent)', 'data/shards-backlog-50-000-4-shards-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 3 title 'walhook, backlog 50,000, 4 shards (unconfirmed)', 'data/shards-backlog-50-000-4-shards-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 3 title 'walhook, backlog 50,000, 4 shards (not yet sent)'
unset multiplot
