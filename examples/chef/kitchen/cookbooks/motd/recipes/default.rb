# Writes the greeting file and reports its path as the deployment's output.
directory node['workdir']

file "#{node['workdir']}/motd" do
  content "#{node['greeting']} from chef\n"
end

file "#{ENV['heat_outputs_path']}.motd_path" do
  content "#{node['workdir']}/motd"
end
